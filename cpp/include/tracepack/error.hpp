// tracepack C++ runtime: errors (spec §9).
//
// Every failure a reader reports has a class (the Python package's error class name, spec §9), a place
// (`byte N`, `header byte N`, a path such as `$.graph.nodes[3].stack`, or `payload`), what is wrong and,
// where known, what was expected. Nothing in the public API throws: functions return `bool` or a
// `Result`, and fill an `Error`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tracepack {

// The error classes of spec §9 (the hierarchy of tracepack.errors).
enum class ErrorClass : std::uint8_t {
    InputError,
    ContainerError,
    VersionError,
    DecodeError,
    IntegrityError,
    UsageError,
    NotFoundError,
    InternalError,  // a bug or resource failure (exit code 1), never an input's fault
};

// "ContainerError", ...: the class name the Python package raises for the same failure.
const char* error_class_name(ErrorClass cls) noexcept;
// The command line's exit code for an error of this class: 2 for input errors, 1 otherwise.
int exit_code(ErrorClass cls) noexcept;

// A failure, as spec §9 names it.
struct Error {
    ErrorClass cls = ErrorClass::InternalError;
    std::string where;
    std::string problem;
    std::string expected;
    bool has_expected = false;

    // The one line the Python CLI prints after `tracepack: `: `SOURCE: WHERE: PROBLEM; expected X`,
    // newlines folded to `\n` (spec §9).
    std::string line(std::string_view source) const;
    // `{"error": CLASS, "place": WHERE, "message": LINE}` (spec §12), one line, no newline.
    std::string json(std::string_view source) const;
};

namespace rt {

// A failure on its way out of a decoder: the place is collected innermost step first, as each
// enclosing field (`.name`) or item (`[3]`) returns (spec §9: places are paths into the document).
struct Failure {
    Error error;
    std::vector<std::string> steps;  // innermost first
    bool fixed = false;              // the place is error.where, not a path (a byte offset, `payload`)

    // Record a failure with a path to be filled in; always returns false.
    bool fail(ErrorClass cls, std::string problem);
    bool fail(ErrorClass cls, std::string problem, std::string expected);
    // Record a failure whose place is known and final (no path steps are added to it).
    bool fail_at(ErrorClass cls, std::string where, std::string problem);
    bool fail_at(ErrorClass cls, std::string where, std::string problem, std::string expected);
    // Add one step to the place of the failure being returned (ignored for a fixed place); false.
    bool step(std::string s);
    bool field(std::string_view name);  // ".name"
    bool index(std::size_t i);          // "[i]"
    // "$" followed by the steps, outermost first.
    std::string path() const;
};

// Python's repr() of a str (for messages quoting a value), and of bytes (b'...').
std::string py_repr(std::string_view utf8);
std::string py_bytes_repr(std::string_view bytes);
// An integer with thousands separators, as Python's f"{n:,}".
std::string with_commas(std::uint64_t n);

}  // namespace rt
}  // namespace tracepack
