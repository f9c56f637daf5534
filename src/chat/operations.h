#pragma once
// Python's operators on template values, as jinja2 applies them: arithmetic with Python's
// rules (true division, floor division and modulo rounding toward negative infinity, str and
// list concatenation and repetition, printf-style `%`), comparisons, `in`, iteration and
// len(). Every failure raises ditto::Error with Python's message; integers are 64-bit, and
// overflowing them is an error rather than a bignum.
#include <cstddef>
#include <optional>
#include <vector>

#include "chat/ast.h"
#include "chat/value.h"

namespace ditto::jinja {

// Raises the error an operation on an undefined value raises in jinja2.
void fail_if_undefined(const Value& value);

// Add, Subtract, Multiply, Divide, FloorDivide, Modulo, Power. Results longer than
// `max_bytes` (strings, lists) are refused.
Value arithmetic(BinaryOp op, const Value& a, const Value& b, size_t max_bytes);
Value negate(const Value& value);
Value unary_plus(const Value& value);
bool compare(CompareOp op, const Value& a, const Value& b);

// Python hashes tuples of hashable items, and no list or dict (sets and dict keys need it).
bool hashable(const Value& value);
// A generator to take items from; raises the error of a generator filter that failed.
Generator& consume(const Value& generator);
// `item in container`; consumes a generator up to the item.
bool contains(const Value& container, const Value& item);
// The items a for loop visits: a string's characters, a dict's keys, a generator's remaining
// items (consuming it); nothing for Undefined.
std::vector<Value> iterate(const Value& value);
int64_t length(const Value& value);
// object[start:stop:step]: of strings (by character), lists and tuples.
Value slice(const Value& object, const Value& start, const Value& stop, const Value& step);
// value % args for a str: printf-style formatting.
std::string percent_format(const std::string& format, const Value& args);

}  // namespace ditto::jinja
