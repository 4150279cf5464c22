#include "log/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

namespace delayq::store {
namespace {

Status Errno(const std::string& what, const std::string& path, int err) {
  return Unavailable(what + " " + path + ": " + std::strerror(err));
}

class PosixFile final : public File {
 public:
  PosixFile(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
    struct stat st;
    if (fstat(fd_, &st) == 0) pos_ = static_cast<uint64_t>(st.st_size);
  }
  ~PosixFile() override { close(fd_); }

  size_t Append(const char* data, size_t n, Status* error) override {
    size_t done = 0;
    while (done < n) {
      ssize_t w = pwrite(fd_, data + done, n - done, static_cast<off_t>(pos_));
      if (w > 0) {
        done += static_cast<size_t>(w);
        pos_ += static_cast<uint64_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      *error = Errno("cannot write", path_, w < 0 ? errno : ENOSPC);
      return done;
    }
    return done;
  }

  void SetWritePosition(uint64_t offset) override { pos_ = offset; }

  Status WriteZeros(uint64_t offset, uint64_t n) override {
    static const char kZeros[64 << 10] = {};
    while (n > 0) {
      size_t part = static_cast<size_t>(std::min<uint64_t>(n, sizeof kZeros));
      ssize_t w = pwrite(fd_, kZeros, part, static_cast<off_t>(offset));
      if (w > 0) {
        offset += static_cast<uint64_t>(w);
        n -= static_cast<uint64_t>(w);
        continue;
      }
      if (w < 0 && errno == EINTR) continue;
      return Errno("cannot write", path_, w < 0 ? errno : ENOSPC);
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (fdatasync(fd_) != 0) return Errno("cannot fdatasync", path_, errno);
    return Status::Ok();
  }

  Result<size_t> ReadAt(uint64_t offset, char* buf, size_t n) override {
    size_t done = 0;
    while (done < n) {
      ssize_t r = pread(fd_, buf + done, n - done, static_cast<off_t>(offset + done));
      if (r > 0) {
        done += static_cast<size_t>(r);
        continue;
      }
      if (r == 0) break;
      if (errno == EINTR) continue;
      return Errno("cannot read", path_, errno);
    }
    return done;
  }

  Status Truncate(uint64_t size) override {
    if (ftruncate(fd_, static_cast<off_t>(size)) != 0)
      return Errno("cannot truncate", path_, errno);
    return Sync();
  }

  Result<uint64_t> Size() override {
    struct stat st;
    if (fstat(fd_, &st) != 0) return Errno("cannot stat", path_, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  const std::string& path() const override { return path_; }

 private:
  const int fd_;
  const std::string path_;
  uint64_t pos_ = 0;
};

class Posix final : public FileSystem {
 public:
  Result<std::unique_ptr<File>> Open(const std::string& path, bool create) override {
    int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
    int fd = open(path.c_str(), flags, 0644);
    if (fd < 0) return Errno(create ? "cannot create" : "cannot open", path, errno);
    return std::unique_ptr<File>(new PosixFile(fd, path));
  }

  Status Remove(const std::string& path) override {
    if (unlink(path.c_str()) != 0) return Errno("cannot remove", path, errno);
    return Status::Ok();
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (rename(from.c_str(), to.c_str()) != 0)
      return Errno("cannot rename " + from + " to", to, errno);
    return Status::Ok();
  }

  Result<std::vector<std::string>> List(const std::string& dir) override {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return Errno("cannot list", dir, errno);
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..") names.push_back(std::move(name));
    }
    closedir(d);
    return names;
  }

  Status SyncDir(const std::string& dir) override {
    int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open directory", dir, errno);
    int rc = fsync(fd);
    int err = errno;
    close(fd);
    if (rc != 0) return Errno("cannot fsync directory", dir, err);
    return Status::Ok();
  }

  Status CreateDir(const std::string& dir) override {
    for (size_t i = 1; i <= dir.size(); ++i) {
      if (i != dir.size() && dir[i] != '/') continue;
      std::string part = dir.substr(0, i);
      if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
        return Errno("cannot create directory", part, errno);
      }
    }
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) return Errno("cannot use directory", dir, errno);
    if (!S_ISDIR(st.st_mode)) return Unavailable("cannot use " + dir + ": not a directory");
    if (access(dir.c_str(), R_OK | W_OK | X_OK) != 0) {
      return Errno("cannot use directory", dir, errno);
    }
    return Status::Ok();
  }

  Result<std::unique_ptr<File>> Lock(const std::string& path) override {
    int fd = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("cannot open to lock", path, errno);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      close(fd);
      if (err == EWOULDBLOCK) {
        return Unavailable(path + " is locked: another delayq is using this data directory");
      }
      return Errno("cannot lock", path, err);
    }
    return std::unique_ptr<File>(new PosixFile(fd, path));
  }
};

}  // namespace

std::shared_ptr<FileSystem> PosixFileSystem() {
  static std::shared_ptr<FileSystem> fs = std::make_shared<Posix>();
  return fs;
}

}  // namespace delayq::store
