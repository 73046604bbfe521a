#include "hierarchy/python_repr.h"

#include <cctype>
#include <cstdint>

namespace onnxforge::hier {
namespace {

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

class ListParser {
 public:
  explicit ListParser(std::string_view s) : s_(s) {}

  std::optional<std::vector<std::string>> parse() {
    std::vector<std::string> out;
    skip_space();
    char close = 0;
    if (eat('['))
      close = ']';
    else if (eat('('))
      close = ')';
    else
      return std::nullopt;
    skip_space();
    if (eat(close)) return finish(out);
    for (;;) {
      skip_space();
      if (s_.substr(i_, 4) == "None") {
        i_ += 4;
        out.emplace_back();
      } else {
        auto item = string_literal();
        if (!item) return std::nullopt;
        out.push_back(std::move(*item));
      }
      skip_space();
      if (eat(',')) {
        skip_space();
        if (eat(close)) return finish(out);
        continue;
      }
      if (eat(close)) return finish(out);
      return std::nullopt;
    }
  }

 private:
  std::optional<std::vector<std::string>> finish(std::vector<std::string>& out) {
    skip_space();
    if (i_ != s_.size()) return std::nullopt;
    return std::move(out);
  }
  void skip_space() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
  }
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  std::optional<uint32_t> hex(size_t digits) {
    if (i_ + digits > s_.size()) return std::nullopt;
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      char c = s_[i_++];
      if (!std::isxdigit(static_cast<unsigned char>(c))) return std::nullopt;
      v = v * 16 +
          static_cast<uint32_t>(std::isdigit(static_cast<unsigned char>(c)) ? c - '0' : (std::tolower(c) - 'a' + 10));
    }
    return v;
  }
  std::optional<std::string> string_literal() {
    if (i_ >= s_.size() || (s_[i_] != '\'' && s_[i_] != '"')) return std::nullopt;
    char quote = s_[i_++];
    std::string out;
    while (i_ < s_.size()) {
      char c = s_[i_++];
      if (c == quote) return out;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (i_ >= s_.size()) return std::nullopt;
      char e = s_[i_++];
      switch (e) {
        case '\\': out.push_back('\\'); break;
        case '\'': out.push_back('\''); break;
        case '"': out.push_back('"'); break;
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case 'x':
        case 'u':
        case 'U': {
          auto cp = hex(e == 'x' ? 2 : e == 'u' ? 4 : 8);
          if (!cp) return std::nullopt;
          append_utf8(out, *cp);
          break;
        }
        default:
          out.push_back('\\');
          out.push_back(e);
          break;
      }
    }
    return std::nullopt;  // unterminated
  }

  std::string_view s_;
  size_t i_ = 0;
};

}  // namespace

std::optional<std::vector<std::string>> parse_python_str_list(std::string_view text) {
  return ListParser(text).parse();
}

}  // namespace onnxforge::hier
