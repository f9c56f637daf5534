#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ditto {

// "151643 785 3974" -> {151643, 785, 3974}. Throws ditto::Error naming the first word that is not
// a token id. An empty text gives no ids.
std::vector<int32_t> parse_token_ids(std::string_view text);

// The whole of a file. Throws ditto::Error if it cannot be read.
std::string read_text(const std::string& path);

// The lines of a text file, without their line ends (a last line without "\n" counts). Throws
// ditto::Error if the file cannot be read.
std::vector<std::string> read_lines(const std::string& path);

// One row of ids per line, as the seed report writes its oracle table; `what` names the rows in
// errors ("prompt", "oracle row"). Every line must hold at least one id.
std::vector<std::vector<int32_t>> read_token_id_rows(const std::string& path, const std::string& what);

}  // namespace ditto
