#include "runtime/token_ids.h"

#include <fstream>
#include <sstream>

#include "ditto/error.h"
#include "tensor/limits.h"

namespace ditto {

std::vector<int32_t> parse_token_ids(std::string_view text) {
  std::vector<int32_t> ids;
  std::istringstream in{std::string(text)};
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long id = -1;
    try {
      id = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != word.size())
      throw Error("'" + word + "' is not a token id (a whole number in 0.." + std::to_string(limits::kTokenId.max) + ")");
    ids.push_back(int32_t(in_range("a token id", int64_t(id), limits::kTokenId)));
  }
  return ids;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot read '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error("error while reading '" + path + "'");
  return text.str();
}

std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot read '" + path + "'");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(line);
  }
  if (in.bad()) throw Error("error while reading '" + path + "'");
  return lines;
}

std::vector<std::vector<int32_t>> read_token_id_rows(const std::string& path, const std::string& what) {
  std::vector<std::vector<int32_t>> rows;
  const std::vector<std::string> lines = read_lines(path);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string where = path + ":" + std::to_string(i + 1) + ": ";
    try {
      rows.push_back(parse_token_ids(lines[i]));
    } catch (const Error& e) {
      throw Error(where + e.what());
    }
    if (rows.back().empty()) throw Error(where + what + " " + std::to_string(i + 1) + " has no token ids");
  }
  if (rows.empty()) throw Error("'" + path + "' holds no " + what + "s");
  return rows;
}

}  // namespace ditto
