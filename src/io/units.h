#pragma once
// Sizes and times for people: "418 MiB", "2.3 ms" (binary prefixes for bytes, as `ls -h` and
// the memory budget use), and sizes read back from the command line ("512M", "2GiB", "1.5G").
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace onnxforge {

inline std::string human_bytes(uint64_t bytes) {
  static constexpr const char* kUnit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 6) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.2f %s" : v < 100 ? "%.1f %s" : "%.0f %s", v, kUnit[u]);
  return buf;
}

inline std::string human_seconds(double s) {
  char buf[32];
  double a = std::fabs(s);
  if (a < 1e-6)
    std::snprintf(buf, sizeof buf, "%.0f ns", s * 1e9);
  else if (a < 1e-3)
    std::snprintf(buf, sizeof buf, a < 1e-5 ? "%.2f us" : "%.1f us", s * 1e6);
  else if (a < 1)
    std::snprintf(buf, sizeof buf, a < 1e-2 ? "%.2f ms" : "%.1f ms", s * 1e3);
  else if (a < 60)
    std::snprintf(buf, sizeof buf, a < 10 ? "%.2f s" : "%.1f s", s);
  else
    std::snprintf(buf, sizeof buf, "%dm %02.0fs", static_cast<int>(s / 60), std::fmod(s, 60.0));
  return buf;
}

// "1024", "512K", "64M", "2G", "2GiB", "1.5GB", "3T" (K/M/G/T are powers of 1024; a trailing "B"
// or "iB" is optional). nullopt on anything else, on a negative number and on overflow.
inline std::optional<uint64_t> parse_bytes(std::string_view text) {
  std::string s(text);
  if (s.empty()) return std::nullopt;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(s, &used);
  } catch (...) { return std::nullopt; }
  if (!(v >= 0) || s[0] == '-' || s[0] == '+' || !std::isfinite(v)) return std::nullopt;
  std::string unit = s.substr(used);
  for (char& c : unit) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  if (unit.size() >= 2 && unit.substr(unit.size() - 2) == "IB")
    unit.resize(unit.size() - 2);
  else if (unit.size() >= 1 && unit.back() == 'B')
    unit.pop_back();
  double scale = 1;
  if (unit == "K")
    scale = 1024.0;
  else if (unit == "M")
    scale = 1024.0 * 1024;
  else if (unit == "G")
    scale = 1024.0 * 1024 * 1024;
  else if (unit == "T")
    scale = 1024.0 * 1024 * 1024 * 1024;
  else if (!unit.empty())
    return std::nullopt;
  double bytes = std::floor(v * scale);
  if (bytes >= 18446744073709551615.0) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

}  // namespace onnxforge
