// tracepack C++ runtime: reading a .tpk file into the current version's document (spec §1-§10).
#include "tracepack/reader.hpp"

#include <cstring>

#include "tracepack/json_reader.hpp"
#include "tracepack/json_writer.hpp"

namespace tracepack {

namespace {

const char* const kExpectedFormats =
    "a .tpk container, a torch.export model.json or .pt2, a TorchScript .pt/.ptl archive, or an ExecuTorch "
    "ETRecord or .pte";

std::string version_text(SchemaVersion v) { return std::to_string(v.major) + "." + std::to_string(v.minor); }

// Which released version's model decodes a document of `v` (spec §10.2): itself, or for a newer minor of
// a known major the newest release of that major.
bool reader_version(SchemaVersion v, SchemaVersion& out, Error& error) {
    const SchemaVersion* newest_same = nullptr;
    for (const auto& r : kReleased) {
        if (r.major == v.major && r.minor == v.minor) {
            out = r;
            return true;
        }
        if (r.major == v.major && (newest_same == nullptr || r.minor > newest_same->minor)) newest_same = &r;
    }
    if (newest_same != nullptr && v.minor > newest_same->minor) {
        out = *newest_same;
        return true;
    }
    std::string expected = "one of ";
    bool first = true;
    for (const auto& r : kReleased) {
        if (!first) expected += ", ";
        expected += version_text(r);
        first = false;
    }
    expected += " or a newer minor of a known major (this build writes " + version_text(kCurrent) + ")";
    error = Error{ErrorClass::VersionError, "header",
                  "schema version " + version_text(v) + " is not readable by this build", expected, true};
    return false;
}

// A failure of a decoder as spec §9 frames it for its codec.
Error framed(const rt::Failure& f, std::uint8_t codec) {
    Error e = f.error;
    if (f.fixed) return e;
    if ((codec == 0 || codec == 1) && f.steps.empty()) {
        // Damage at the root of a keyed or positional payload is the payload's (spec §9.2.1).
        e.where = "payload";
        e.problem = std::string(codec == 0 ? "not valid JSON: " : "not valid MessagePack: ") + e.problem;
        return e;
    }
    e.where = f.path();
    return e;
}

// The note a failure gets when the file is a newer minor than this build knows (spec §10.3).
void newer_note(Error& e, SchemaVersion written, SchemaVersion reader) {
    if (e.cls != ErrorClass::DecodeError && e.cls != ErrorClass::IntegrityError) return;
    e.problem += " (the file is schema " + version_text(written) + ", newer than " + version_text(reader) +
                 ", the newest this build reads: it may use something added since; a newer tracepack reads it)";
}

bool not_a_container(std::string_view data, Error& error) {
    // What is not a container is not this reader's (spec §1.3): say what it looks like.
    auto at = [&](std::size_t i, const char* s) { return data.size() >= i + 4 && std::memcmp(data.data() + i, s, 4) == 0; };
    if (at(0, "PK\x03\x04") || (data.size() >= 4 && std::memcmp(data.data(), "PK\x05\x06", 4) == 0)) {
        error = Error{ErrorClass::InputError, "byte 0",
                      "a zip archive (a torch .pt2 or TorchScript file): tracepack-cpp reads .tpk containers; "
                      "convert it with `tracepack convert`",
                      "a .tpk container", true};
        return false;
    }
    std::size_t i = 0;
    while (i < data.size() && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r')) ++i;
    if (i < data.size() && (data[i] == '{' || data[i] == '[')) {
        if (data.substr(0, 1 << 20).find("\"graph_module\"") != std::string_view::npos) {
            error = Error{ErrorClass::InputError, "byte 0",
                          "a torch.export model.json: tracepack-cpp reads .tpk containers; convert it with "
                          "`tracepack convert`",
                          "a .tpk container", true};
            return false;
        }
        // JSON, but no program: what the reference says of it (spec §1.3)
        rt::Failure ignored;
        js::Reader r(reinterpret_cast<const std::uint8_t*>(data.data()), data.size(), ignored, 100000);
        if (r.skip(0) && r.finish()) {
            error = Error{ErrorClass::ContainerError, "byte 0",
                          "not a format tracepack reads: JSON, but not a torch.export program (no graph_module)",
                          kExpectedFormats, true};
            return false;
        }
    }
    if (at(4, "ET12")) {
        error = Error{ErrorClass::InputError, "byte 0",
                      "an ExecuTorch .pte program: tracepack-cpp reads .tpk containers; convert it with "
                      "`tracepack convert`",
                      "a .tpk container", true};
        return false;
    }
    if (at(8, "ED00")) {
        // the Python reader's class for it (tracepack.formats: a ContainerError, the file as a whole)
        error = Error{ErrorClass::ContainerError, {},
                      "an ExecuTorch ETDump (a profile, not a program): annotate it with `tracepack annotate ETDUMP "
                      "--with ARTIFACT`",
                      kExpectedFormats, true};
        return false;
    }
    error = Error{ErrorClass::ContainerError, "byte 0", "not a format tracepack reads: " + describe_content(data),
                  kExpectedFormats, true};
    return false;
}

}  // namespace

bool read_document(std::string_view data, const ReadOptions& options, current::Document& out, Error& error) {
    if (data.size() < 4 || std::memcmp(data.data(), "\x89TPK", 4) != 0) return not_a_container(data, error);
    Header header;
    std::string storage;
    std::string_view payload;
    if (!unpack(data, options.limits, options.dictionaries, header, storage, payload, error)) return false;
    const SchemaVersion written{header.major, header.minor};
    SchemaVersion version{};
    if (!reader_version(written, version, error)) return false;
    const bool newer = version.major != written.major || version.minor != written.minor;

    AnyDocument doc;
    rt::Failure failure;
    bool supported = true;
    if (!decode_payload(version, header.codec, payload, options.limits, doc, failure, supported)) {
        if (!supported) {
            error = Error{ErrorClass::InputError, "header byte 16",
                          std::string("codec ") + std::to_string(header.codec) + " (" + codec_name(header.codec) +
                              ") is not read by tracepack-cpp yet",
                          "0 (json), 1 (msgpack), 2 (flatbuffers-rows), 3 (columnar) or 4 (flatbuffers-columns)", true};
            return false;
        }
        error = framed(failure, header.codec);
        if (newer) newer_note(error, written, version);
        return false;
    }
    std::string_view magic;
    SchemaVersion declared{};
    payload_header(doc, magic, declared);
    if (magic != "tracepack") {
        error = Error{ErrorClass::DecodeError, "$.header.magic", "payload magic is " + rt::py_repr(magic), "'tracepack'",
                      true};
        return false;
    }
    if (declared.major != written.major || declared.minor != written.minor) {
        error = Error{ErrorClass::DecodeError, "$.header.version",
                      "payload says schema " + version_text(declared) + ", container header says " + version_text(written),
                      {}, false};
        return false;
    }
    if (newer) set_payload_version(doc, version);
    rt::Failure invalid;
    bool ok = validate_any(doc, invalid);
    if (ok) {
        out = upgrade_to_current(std::move(doc));
        ok = current::validate(out, invalid) && check_document(out, invalid);
    }
    if (!ok) {
        error = invalid.error;
        if (!invalid.fixed) error.where = invalid.path();
        if (newer) newer_note(error, written, version);
        return false;
    }
    return true;
}

bool check_document(const current::Document& doc, rt::Failure& f) {
    const auto& nodes = doc.graph.nodes;
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const auto& n = nodes[i];
        if (n.meta_keys.size() != n.meta_values.size()) {
            return f.fail_at(ErrorClass::IntegrityError, "$.graph.nodes[" + std::to_string(i) + "].meta_values",
                             std::to_string(n.meta_keys.size()) + " metadata keys but " +
                                 std::to_string(n.meta_values.size()) + " values",
                             "one value per key");
        }
    }
    const auto& src = doc.sources;
    std::uint64_t lines = 0;
    for (auto c : src.line_count) lines += c;
    if (lines != src.lines.size()) {
        return f.fail_at(ErrorClass::IntegrityError, "$.sources.line_count",
                         "sources take " + std::to_string(lines) + " lines but the pool has " +
                             std::to_string(src.lines.size()),
                         "line counts that add up to len($.sources.lines)");
    }
    const auto& handles = doc.debug_handles.handle;
    for (std::size_t i = 1; i < handles.size(); ++i) {
        if (handles[i - 1] >= handles[i]) {
            return f.fail_at(ErrorClass::IntegrityError, "$.debug_handles.handle[" + std::to_string(i) + "]",
                             "debug handle " + std::to_string(handles[i]) + " follows " + std::to_string(handles[i - 1]),
                             "handles strictly ascending (readers find a handle by binary search)");
        }
    }
    for (std::size_t i = 0; i < nodes.size(); ++i) {
        const auto& n = nodes[i];
        const std::int64_t at = n.from_node_meta_index;
        if (at == -1) continue;
        std::string problem;
        if (at < 0 || static_cast<std::uint64_t>(at) > n.meta_keys.size()) {
            problem = "from_node_meta_index " + std::to_string(at) + " is outside the metadata (" +
                      std::to_string(n.meta_keys.size()) + " keys)";
        } else {
            bool keyed = false;
            for (auto k : n.meta_keys) keyed |= doc.strings[k] == "from_node";
            if (!keyed) continue;
            problem = "the metadata has a `from_node` key and a lifted `from_node` (from_node_meta_index)";
        }
        return f.fail_at(ErrorClass::IntegrityError, "$.graph.nodes[" + std::to_string(i) + "].from_node_meta_index",
                         problem,
                         "-1, or 0.." + std::to_string(n.meta_keys.size()) + " with no `from_node` key among meta_keys");
    }
    if (!doc.provenance) return true;
    const auto& t = *doc.provenance;
    std::uint64_t children = 0;
    for (auto c : t.child_count) children += c;
    if (children != t.children.size()) {
        return f.fail_at(ErrorClass::IntegrityError, "$.provenance.child_count",
                         "provenance rows take " + std::to_string(children) + " children but the pool has " +
                             std::to_string(t.children.size()),
                         "child counts that add up to len($.provenance.children)");
    }
    // Children come before their parents: every pooled child is below the row that owns it.
    std::size_t pos = 0;
    for (std::size_t row = 0; row < t.child_count.size(); ++row) {
        const std::size_t count = t.child_count[row];
        for (std::size_t j = pos; j < pos + count; ++j) {
            if (t.children[j] >= row) {
                return f.fail_at(ErrorClass::IntegrityError, "$.provenance.children[" + std::to_string(j) + "]",
                                 "provenance row " + std::to_string(row) + " has child " +
                                     std::to_string(t.children[j]) + ", which is not an earlier row",
                                 "a row below " + std::to_string(row));
            }
        }
        pos += count;
    }
    return true;
}

std::string canonical_json(const current::Document& doc) {
    std::string out;
    out.reserve(doc.strings.size() * 32 + doc.graph.nodes.size() * 512);
    JsonWriter w(out);
    current::write_plain(doc, w);
    out += '\n';
    return out;
}

}  // namespace tracepack
