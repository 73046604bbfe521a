#include "io/safe_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>

#include "ir/error.h"

namespace onnxforge {
namespace {

constexpr std::string_view kMarker = ".onnxforge-tmp.";

std::filesystem::path folder_of(const std::filesystem::path& p) {
  return p.parent_path().empty() ? std::filesystem::path(".") : p.parent_path();
}

// The umask without changing it (umask(2) is process-wide; another thread may be creating files).
mode_t process_umask() {
  int fd = ::open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 022;
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return 022;
  std::string_view text(buf, static_cast<size_t>(n));
  auto at = text.find("Umask:");
  if (at == std::string_view::npos) return 022;
  at = text.find_first_of("01234567", at);
  unsigned mask = 022;
  if (at != std::string_view::npos) std::from_chars(text.data() + at, text.data() + text.size(), mask, 8);
  return static_cast<mode_t>(mask & 0777);
}

// `.NAME.onnxforge-tmp.PID.RANDOM`: 64 random bits, so another user of the folder cannot plant a
// link under the name beforehand (and O_EXCL|O_NOFOLLOW / linkat refuse one anyway).
std::filesystem::path temp_name(const std::filesystem::path& target) {
  std::random_device rd;
  uint64_t r = (uint64_t{rd()} << 32) ^ rd();
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(r));
  std::string name = "." + target.filename().string();
  name += kMarker;
  name += std::to_string(::getpid());
  name += '.';
  name += hex;
  return folder_of(target) / name;
}

bool is_input(const struct stat& st, const WriteRules& rules) {
  FileIdentity id{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
  for (const FileIdentity& in : rules.inputs)
    if (in == id) return true;
  return false;
}

// The rules for one existing or absent path (shared by the early check and commit).
void check_target(const std::filesystem::path& path, const WriteRules& rules, const std::string& what) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    fail_usage(what, " '", path.string(), "': ", std::strerror(errno));
  }
  if (S_ISLNK(st.st_mode)) {
    std::error_code ec;
    auto to = std::filesystem::read_symlink(path, ec);
    fail_usage("refusing to write ", what, " '", path.string(), "': it is a symbolic link", ec ? "" : " to '",
               ec ? "" : to.string(), ec ? "" : "'", "; give the file itself");
  }
  if (!S_ISREG(st.st_mode))
    fail_usage("refusing to write ", what, " '", path.string(), "': it is ", file_kind(st.st_mode),
               ", not a regular file (--overwrite replaces regular files only)");
  if (is_input(st, rules))
    fail_usage("refusing to write ", what, " '", path.string(),
               "': it is one of the command's inputs; choose another path");
  if (!rules.overwrite) fail_usage(what, " '", path.string(), "' exists; pass --overwrite to replace it");
}

// The folder's identity plus the name: two spellings of one output ("a/../x", "./x") are one file.
std::pair<std::optional<FileIdentity>, std::string> output_key(const std::filesystem::path& p) {
  return {file_identity(folder_of(p)), p.filename().string()};
}

}  // namespace

WriteRules& WriteRules::protect(const std::filesystem::path& path) {
  if (auto id = file_identity(path)) inputs.push_back(*id);
  return *this;
}

void check_output(const std::filesystem::path& path, const WriteRules& rules, const std::string& what) {
  std::string w[] = {what};
  check_outputs({&path, 1}, w, rules);
}

void check_outputs(std::span<const std::filesystem::path> paths, std::span<const std::string> what,
                   const WriteRules& rules) {
  for (size_t i = 0; i < paths.size(); ++i) try {
      const std::filesystem::path& p = paths[i];
      const std::string& w = i < what.size() ? what[i] : std::string("output");
      if (p.empty() || p.filename().empty() || p.filename() == "." || p.filename() == "..")
        fail_usage(w, " '", p.string(), "': give a file name");
      std::filesystem::path dir = folder_of(p);
      struct stat st {};
      if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
        fail_usage(w, " '", p.string(), "': folder '", dir.string(), "' does not exist");
      if (::access(dir.c_str(), W_OK) != 0)
        fail_usage(w, " '", p.string(), "': cannot write in '", dir.string(), "': ", std::strerror(errno));
      check_target(p, rules, w);
      for (size_t j = 0; j < i; ++j)
        if (output_key(paths[j]) == output_key(p))
          fail_usage(w, " '", p.string(), "' is the same file as ", j < what.size() ? what[j] : "output", " '",
                     paths[j].string(), "'; give each output its own path");
    } catch (const Error& e) {
      throw e.about(paths[i].string());  // --json names the file
    }
}

AtomicFile::AtomicFile(const std::filesystem::path& target, WriteRules rules)
    : target_(target), rules_(std::move(rules)) {
  tmp_ = temp_name(target_);
#ifdef O_TMPFILE
  fd_ = ::open(folder_of(target_).c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  if (fd_ >= 0) {
    anonymous_ = true;
    ::fchmod(fd_, 0644 & ~process_umask());  // as open(O_CREAT, 0644) would have made it
  }
#endif
  if (fd_ < 0) {
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw Error("cannot create '" + tmp_.string() + "' next to '" + target_.string() + "': " + std::strerror(errno),
                  Error::Kind::Input, target_.string());
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_ && (!anonymous_ || linked_)) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t size) { write_all(fd_, data, size, target_); }

void AtomicFile::commit() {
  if (anonymous_) {
    // linkat cannot replace an existing file: link under the temporary name, then rename.
    std::string proc = "/proc/self/fd/" + std::to_string(fd_);
    if (::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, tmp_.c_str(), AT_SYMLINK_FOLLOW) != 0)
      fail("cannot create '", tmp_.string(), "' next to '", target_.string(), "': ", std::strerror(errno));
    linked_ = true;
  }
  int fd = fd_;
  fd_ = -1;
  // close() reports delayed write errors (NFS, a full disk on some file systems).
  if (::close(fd) != 0) fail("cannot finish writing '", target_.string(), "': ", std::strerror(errno));
  check_target(target_, rules_, "output");  // again: the folder may have changed during a long job
  if (!rules_.overwrite) {
    if (::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, target_.c_str(), RENAME_NOREPLACE) != 0) {
      if (errno == EEXIST)
        fail_usage("output '", target_.string(), "' appeared while writing; pass --overwrite to replace it");
      if (errno != EINVAL && errno != ENOSYS)
        fail("cannot rename '", tmp_.string(), "' to '", target_.string(), "': ", std::strerror(errno));
      // No RENAME_NOREPLACE on this file system: link(2) refuses an existing name too.
      if (::link(tmp_.c_str(), target_.c_str()) != 0)
        fail("cannot create '", target_.string(), "': ", std::strerror(errno));
      ::unlink(tmp_.c_str());
    }
  } else if (::rename(tmp_.c_str(), target_.c_str()) != 0) {
    fail("cannot rename '", tmp_.string(), "' to '", target_.string(), "': ", std::strerror(errno));
  }
  committed_ = true;
}

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes, const WriteRules& rules) {
  try {
    check_output(path, rules);
    AtomicFile f(path, rules);
    f.write(bytes.data(), bytes.size());
    f.commit();
  } catch (const Error& e) { throw e.about(path.string()); }
}

void remove_stale_temporaries(const std::filesystem::path& dir) {
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator(dir.empty() ? "." : dir, ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    auto at = name.find(kMarker);
    if (name.empty() || name[0] != '.' || at == std::string::npos) continue;
    std::string_view rest = std::string_view(name).substr(at + kMarker.size());
    auto dot = rest.find('.');
    if (dot == std::string_view::npos) continue;
    long pid = 0;
    auto [p, err] = std::from_chars(rest.data(), rest.data() + dot, pid);
    if (err != std::errc() || p != rest.data() + dot || pid <= 0) continue;
    if (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM) continue;  // still running
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) ::unlink(it->path().c_str());
  }
}

std::string read_side_file(const std::filesystem::path& path, std::string_view what, uint64_t max_bytes) {
  auto bad = [&](auto&&... parts) -> Error {
    std::ostringstream os;
    os << what << " '" << path.string() << "'";
    (os << ... << parts);
    return Error(os.str(), Error::Kind::Input, path.string());
  };
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer; fstat then refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) throw bad(": cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    throw bad(": cannot stat: ", std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw bad(" is ", file_kind(st.st_mode), ", not a regular file");
  }
  if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    ::close(fd);
    throw bad(" is ", st.st_size, " bytes, more than the ", max_bytes, " allowed for it");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = ::read(fd, out.data() + done, out.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      throw bad(": cannot read: ", std::strerror(e));
    }
    if (n == 0) break;  // shrank while reading
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(done);
  return out;
}

}  // namespace onnxforge
