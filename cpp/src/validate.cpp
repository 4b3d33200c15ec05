// tracepack C++ runtime: the checks generated validators call (spec §9.4.1).
#include "tracepack/validate.hpp"

namespace tracepack::check {

bool check_string_table(const std::vector<std::string>& strings, const std::string& where, rt::Failure& f) {
    if (!strings.empty() && strings[0].empty()) return true;
    std::string got = strings.empty() ? "an empty table" : rt::py_repr(strings[0]);
    f.fail_at(ErrorClass::IntegrityError, where + "[0]", "string 0 is " + got, "\"\"");
    return false;
}

bool check_column(std::size_t length, std::size_t rows, bool sparse, const std::string& where, rt::Failure& f) {
    if (length == rows || (sparse && length == 0)) return true;
    f.fail_at(ErrorClass::IntegrityError, where,
              "column has " + std::to_string(length) + " entries but the table has " + std::to_string(rows) + " rows",
              std::to_string(rows) + " entries" + (sparse ? " or none" : ""));
    return false;
}

bool check_reserved_row(std::size_t rows, const std::string& where, rt::Failure& f) {
    if (rows >= 1) return true;
    f.fail_at(ErrorClass::IntegrityError, where, "table has no rows", "row 0, the reserved empty entry");
    return false;
}

}  // namespace tracepack::check
