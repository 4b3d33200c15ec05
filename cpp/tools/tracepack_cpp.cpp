// tracepack-cpp: the C++ reader's command line.
//
//   tracepack-cpp cat [--error-format text|json] [--zstd-dict FILE|NAME] [--dict-dir DIR] FILE
//   tracepack-cpp trace [--json] [--error-format text|json] [--zstd-dict FILE|NAME] [--dict-dir DIR] FILE NODE...
//
// `trace` prints each node's stack trace and module hierarchy as `tracepack trace FILE NODE...` does
// (spec §11.3), reading an uncompressed FlatBuffers file (codec 2 or 4) lazily (spec §9.5): only the
// bytes of those nodes, their stacks, modules and strings are read and checked; any other file is read
// whole as `cat` reads it.
//
// `cat` prints the document as `tracepack cat FILE` does, byte for byte (spec §11.2). On bad input it
// exits 2 and prints one line on standard error: `tracepack: FILE: PLACE: problem; expected ...` as the
// Python command line does, or with `--error-format json` one JSON object naming the error's class,
// place and message (spec §12). The built-in zstd dictionaries are read from DIR, else from
// $TRACEPACK_ZSTD_DICT_DIR, else from the package's folder found relative to this program.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tracepack/dictionaries.hpp"
#include "tracepack/lazy.hpp"
#include "tracepack/reader.hpp"

#ifndef TRACEPACK_DICT_DIR_FROM_BINARY
#define TRACEPACK_DICT_DIR_FROM_BINARY "../src/tracepack/data/zstd"
#endif

namespace {

using tracepack::Error;
using tracepack::ErrorClass;

constexpr int kExitOk = 0;
constexpr int kExitUsage = 2;

const char* const kUsage =
    "usage: tracepack-cpp cat [--error-format text|json] [--zstd-dict FILE|NAME] [--dict-dir DIR] FILE\n"
    "       tracepack-cpp trace [--json] [--error-format text|json] [--zstd-dict FILE|NAME] FILE NODE...\n"
    "\n"
    "  cat FILE          print the document as plain JSON, strings resolved (as `tracepack cat FILE`)\n"
    "  trace FILE NODE   print nodes' stack traces and module hierarchies (as `tracepack trace`); NODE is a\n"
    "                    name or #INDEX (uncompressed FlatBuffers files are read lazily)\n"
    "\n"
    "options:\n"
    "  --error-format json  on bad input, one JSON line on stderr: {\"error\": CLASS, \"place\": PLACE, "
    "\"message\": LINE}\n"
    "  --zstd-dict FILE     the dictionary the file was compressed with (a file, or a built-in one's name)\n"
    "  --dict-dir DIR       the built-in zstd dictionaries' folder (default: $TRACEPACK_ZSTD_DICT_DIR, else the\n"
    "                       package's src/tracepack/data/zstd found from this program's location)\n";

struct Options {
    bool json_errors = false;
    std::string dict_dir;
    std::string zstd_dict;
    bool has_zstd_dict = false;
    bool json = false;
    std::string command;
    std::string file;
    std::vector<std::string> nodes;
};

int report(const Options& o, const std::string& source, const Error& e) {
    std::string text = o.json_errors ? e.json(source) : "tracepack: " + e.line(source);
    text += '\n';
    std::fwrite(text.data(), 1, text.size(), stderr);
    return tracepack::exit_code(e.cls);
}

int usage_error(const Options& o, const std::string& problem) {
    if (!o.json_errors) std::fputs(kUsage, stderr);
    Error e{ErrorClass::UsageError, {}, problem, {}, false};
    return report(o, "", e);
}

std::string default_dict_dir() {
    if (const char* env = std::getenv("TRACEPACK_ZSTD_DICT_DIR"); env && *env) return env;
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return TRACEPACK_DICT_DIR_FROM_BINARY;
    std::string exe(buf, static_cast<std::size_t>(n));
    std::size_t slash = exe.rfind('/');
    std::string dir = slash == std::string::npos ? "." : exe.substr(0, slash);
    return dir + "/" + TRACEPACK_DICT_DIR_FROM_BINARY;
}

const char* kind_of(mode_t mode) {
    if (S_ISDIR(mode)) return "a folder";
    if (S_ISLNK(mode)) return "a symbolic link";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// A regular file's bytes, as the Python command line reads its inputs (tracepack.io.files.read_input).
bool read_file(const std::string& path, const tracepack::Limits& limits, std::string& data, Error& error) {
    int fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        error = Error{ErrorClass::UsageError, {}, std::string("cannot open: ") + std::strerror(errno), {}, false};
        return false;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0) {
        error = Error{ErrorClass::UsageError, {}, std::string("cannot open: ") + std::strerror(errno), {}, false};
        close(fd);
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        error = Error{ErrorClass::UsageError, {}, std::string("is ") + kind_of(st.st_mode) + ", not a regular file",
                      "a file (pipe data through standard input with '-')", true};
        close(fd);
        return false;
    }
    if (static_cast<std::uint64_t>(st.st_size) > limits.max_input) {
        error = Error{ErrorClass::InputError, {},
                      "file of " + std::to_string(st.st_size) + " bytes is larger than the " +
                          std::to_string(limits.max_input) + "-byte input limit",
                      "a smaller input, " + tracepack::limit_hint("max_input"), true};
        close(fd);
        return false;
    }
    int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
    data.clear();
    data.resize(static_cast<std::size_t>(st.st_size));
    std::size_t got = 0;
    while (true) {
        if (got == data.size()) data.resize(data.size() + (1 << 16));  // it grew: read on
        ssize_t n = read(fd, data.data() + got, data.size() - got);
        if (n < 0) {
            if (errno == EINTR) continue;
            error = Error{ErrorClass::UsageError, {}, std::string("cannot open: ") + std::strerror(errno), {}, false};
            close(fd);
            return false;
        }
        if (n == 0) break;
        got += static_cast<std::size_t>(n);
        if (got > limits.max_input) break;
    }
    close(fd);
    data.resize(got);
    if (got > limits.max_input) {
        error = Error{ErrorClass::InputError, {},
                      "file is larger than the " + std::to_string(limits.max_input) + "-byte input limit", {}, false};
        return false;
    }
    return true;
}

bool write_all(const std::string& text) {
    std::size_t done = 0;
    while (done < text.size()) {
        ssize_t n = write(STDOUT_FILENO, text.data() + done, text.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno == EPIPE;  // a closed pipe (`| head`): not an error, as for the Python CLI
        }
        done += static_cast<std::size_t>(n);
    }
    return true;
}

int cmd_cat(const Options& o) {
    tracepack::ReadOptions options;
    options.dictionaries.path = o.dict_dir.empty() ? default_dict_dir() : o.dict_dir;
    std::string data;
    Error error;
    if (o.has_zstd_dict) {
        // a built-in dictionary's name (when no such file exists), else a dictionary file (spec §8.3)
        struct stat st {};
        std::vector<tracepack::BuiltinDictionary> all;
        const tracepack::BuiltinDictionary* builtin = nullptr;
        if (stat(o.zstd_dict.c_str(), &st) != 0 && tracepack::builtin_dictionaries(options.dictionaries.path, all, error)) {
            for (const auto& d : all) {
                if (d.name == o.zstd_dict && !d.withdrawn) builtin = &d;
            }
        }
        if (builtin != nullptr) {
            if (!tracepack::load_dictionary(*builtin, all, options.dictionaries.path, options.dictionaries.user, error)) {
                return report(o, o.file, error);
            }
        } else if (!read_file(o.zstd_dict, options.limits, options.dictionaries.user, error)) {
            return report(o, o.zstd_dict, error);
        }
        options.dictionaries.has_user = true;
    }
    if (!read_file(o.file, options.limits, data, error)) return report(o, o.file, error);
    tracepack::current::Document doc;
    if (!tracepack::read_document(data, options, doc, error)) return report(o, o.file, error);
    data.clear();
    data.shrink_to_fit();
    if (!write_all(tracepack::canonical_json(doc))) {
        Error e{ErrorClass::InternalError, {}, std::string("cannot write: ") + std::strerror(errno), {}, false};
        return report(o, "<stdout>", e);
    }
    return kExitOk;
}

// The reading options of `cat` (built-in dictionaries, --zstd-dict): false with the error reported.
bool read_options(const Options& o, tracepack::ReadOptions& options, int& code) {
    Error error;
    options.dictionaries.path = o.dict_dir.empty() ? default_dict_dir() : o.dict_dir;
    if (!o.has_zstd_dict) return true;
    // a built-in dictionary's name (when no such file exists), else a dictionary file (spec §8.3)
    struct stat st {};
    std::vector<tracepack::BuiltinDictionary> all;
    const tracepack::BuiltinDictionary* builtin = nullptr;
    if (stat(o.zstd_dict.c_str(), &st) != 0 && tracepack::builtin_dictionaries(options.dictionaries.path, all, error)) {
        for (const auto& d : all) {
            if (d.name == o.zstd_dict && !d.withdrawn) builtin = &d;
        }
    }
    if (builtin != nullptr) {
        if (!tracepack::load_dictionary(*builtin, all, options.dictionaries.path, options.dictionaries.user, error)) {
            code = report(o, o.file, error);
            return false;
        }
    } else if (!read_file(o.zstd_dict, options.limits, options.dictionaries.user, error)) {
        code = report(o, o.zstd_dict, error);
        return false;
    }
    options.dictionaries.has_user = true;
    return true;
}

int cmd_trace(const Options& o) {
    Error error;
    tracepack::LazyDocument doc;
    if (!tracepack::LazyDocument::is_lazy(o.file)) {
        // Any other file is read whole, as `tracepack trace` reads it (tracepack.load), then answered.
        tracepack::ReadOptions options;
        int code = 0;
        if (!read_options(o, options, code)) return code;
        std::string data;
        if (!read_file(o.file, options.limits, data, error)) return report(o, o.file, error);
        tracepack::current::Document whole;
        if (!tracepack::read_document(data, options, whole, error)) return report(o, o.file, error);
        doc.adopt(std::move(whole));
    } else if (!doc.open(o.file, error)) {
        return report(o, o.file, error);
    }
    std::vector<tracepack::NodeTrace> found(o.nodes.size());
    for (std::size_t i = 0; i < o.nodes.size(); ++i) {
        std::uint64_t index = 0;
        if (!doc.find(o.nodes[i], index, error) || !doc.trace(index, found[i], error)) return report(o, o.file, error);
    }
    std::string text = o.json ? tracepack::render_trace_json(found) : tracepack::render_trace_text(found);
    if (!write_all(text)) {
        Error e{ErrorClass::InternalError, {}, std::string("cannot write: ") + std::strerror(errno), {}, false};
        return report(o, "<stdout>", e);
    }
    return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
    std::signal(SIGPIPE, SIG_IGN);
    Options o;
    std::vector<std::string> positional;
    // Which run of positionals between options each one came in (0: the command), as argparse sees them.
    std::vector<int> run_of;
    int run = 0;
    int last_at = -1;  // argv index of the last positional
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::fputs(kUsage, stdout);
            return kExitOk;
        }
        // Options follow the command, as in `tracepack COMMAND [options]` (argparse's subcommands).
        if (positional.empty() && a.size() > 1 && a[0] == '-') return usage_error(o, "unrecognized arguments: " + a);
        if (a == "--json") {
            o.json = true;
            continue;
        }
        if (a == "--error-format" || a.rfind("--error-format=", 0) == 0) {
            std::string v;
            if (a == "--error-format") {
                if (i + 1 >= argc) return usage_error(o, "argument --error-format: expected one argument");
                v = argv[++i];
            } else {
                v = a.substr(std::strlen("--error-format="));
            }
            if (v == "json") {
                o.json_errors = true;
            } else if (v != "text") {
                return usage_error(o, "argument --error-format: invalid choice: '" + v + "' (choose from 'text', 'json')");
            }
            continue;
        }
        if (a == "--zstd-dict" || a.rfind("--zstd-dict=", 0) == 0) {
            if (a == "--zstd-dict") {
                if (i + 1 >= argc) return usage_error(o, "argument --zstd-dict: expected one argument");
                o.zstd_dict = argv[++i];
            } else {
                o.zstd_dict = a.substr(std::strlen("--zstd-dict="));
            }
            o.has_zstd_dict = true;
            continue;
        }
        if (a == "--dict-dir" || a.rfind("--dict-dir=", 0) == 0) {
            if (a == "--dict-dir") {
                if (i + 1 >= argc) return usage_error(o, "argument --dict-dir: expected one argument");
                o.dict_dir = argv[++i];
            } else {
                o.dict_dir = a.substr(std::strlen("--dict-dir="));
            }
            continue;
        }
        if (a.size() > 1 && a[0] == '-' && a != "-") return usage_error(o, "unrecognized arguments: " + a);
        // the command's arguments start a run of their own; an option (and its value) ends a run
        if (positional.size() == 1 || (positional.size() > 1 && last_at != i - 1)) ++run;
        positional.push_back(a);
        run_of.push_back(run);
        last_at = i;
    }
    if (positional.empty()) return usage_error(o, "the following arguments are required: command");
    o.command = positional[0];
    if (o.command == "trace" || o.command == "cat") {
        // argparse fills FILE NODE... (trace) or FILE (cat) from the first run of positionals, and NODE...
        // from the second when the first held FILE alone; a run after that is not its arguments.
        bool file_alone = positional.size() > 1 && (positional.size() == 2 || run_of[2] != run_of[1]);
        int last_run = o.command == "trace" && file_alone ? 2 : 1;
        std::string extras;
        for (std::size_t k = 1; k < positional.size(); ++k) {
            if (run_of[k] > last_run) extras += (extras.empty() ? "" : " ") + positional[k];
        }
        if (!extras.empty()) return usage_error(o, "unrecognized arguments: " + extras);
    }
    if (o.command == "trace") {
        if (positional.size() < 3) return usage_error(o, "trace takes a FILE and one or more NODEs");
        o.file = positional[1];
        o.nodes.assign(positional.begin() + 2, positional.end());
        if (o.file == "-") return usage_error(o, "standard input is not read yet: give a FILE");
        return cmd_trace(o);
    }
    if (o.command != "cat") {
        return usage_error(o, "argument command: invalid choice: '" + o.command + "' (choose from 'cat', 'trace')");
    }
    if (o.json) return usage_error(o, "unrecognized arguments: --json");  // trace's option, not cat's
    if (positional.size() != 2) return usage_error(o, "cat takes one FILE");
    o.file = positional[1];
    if (o.file == "-") return usage_error(o, "standard input is not read yet: give a FILE");
    return cmd_cat(o);
}
