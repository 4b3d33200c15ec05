// tracepack C++ runtime: the canonical JSON text (spec §11.2.2).
//
// What `tracepack cat` prints is Python's `json.dumps(value, ensure_ascii=False, indent=2)`: two spaces
// per level, `", "` never (items end their line), `": "` after keys, `[]` and `{}` for empty containers,
// strings with `"`, `\`, and control characters escaped (`\n`, `\u001b`, ...), everything else as UTF-8,
// integers in decimal and floats as Python's repr() writes them (the shortest text that reads back as
// the same double: `0.1`, `1e-05`, `1e+16`, `-0.0`).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tracepack {

// Python's repr() of a float (finite or not: `nan`, `inf`, `-inf`).
std::string py_float_repr(double x);
void append_py_float_repr(std::string& out, double x);

class JsonWriter {
public:
    explicit JsonWriter(std::string& out, int indent = 2) : out_(out), indent_(indent) {}

    void begin_object() { open('{'); }
    void end_object() { close('}'); }
    void begin_array() { open('['); }
    void end_array() { close(']'); }
    // A member's key; its value follows.
    void key(std::string_view k) {
        item();
        quoted(k);
        out_ += ": ";
        after_key_ = true;
    }
    void string(std::string_view s) {
        item();
        quoted(s);
    }
    void integer(std::int64_t v);
    void uinteger(std::uint64_t v);
    void real(double v);
    void boolean(bool v) {
        item();
        out_ += v ? "true" : "false";
    }
    void null() {
        item();
        out_ += "null";
    }

private:
    void item() {
        if (after_key_) {
            after_key_ = false;
            return;
        }
        if (stack_.empty()) return;
        if (stack_.back()) {
            stack_.back() = false;
        } else {
            out_ += ',';
        }
        newline(stack_.size());
    }
    void newline(std::size_t level) {
        out_ += '\n';
        out_.append(level * static_cast<std::size_t>(indent_), ' ');
    }
    void open(char c) {
        item();
        out_ += c;
        stack_.push_back(true);
    }
    void close(char c) {
        bool empty = stack_.back();
        stack_.pop_back();
        if (!empty) newline(stack_.size());
        out_ += c;
    }
    void quoted(std::string_view s);

    std::string& out_;
    int indent_;
    std::vector<bool> stack_;  // per open container: no item written yet
    bool after_key_ = false;
};

}  // namespace tracepack
