// Certificates for TLS tests, made by the `openssl` command (Debian's
// openssl package, in bootstrap.sh's test set) in a fresh directory under
// $TMPDIR (or /tmp), removed when the object dies: a CA, a server
// certificate for localhost and 127.0.0.1 signed by it, a client certificate
// signed by it, and a second CA with a client certificate of its own. Keys
// are P-256 (quick to make: the whole set takes well under a second).
//
//   auto certs = TestCerts::Make();
//   ASSERT_TRUE(certs.ok()) << certs.status().ToString();
//   options.cert_file = (*certs)->Path("server.pem");
//
// Files: ca.pem, server.pem (leaf then the CA: a chain), server.key,
// client.pem, client.key, other-ca.pem, other-client.pem, other-client.key.
#ifndef DELAYQ_TESTS_TESTING_TEST_CERTS_H_
#define DELAYQ_TESTS_TESTING_TEST_CERTS_H_

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "delayq/status.h"

namespace delayq {

class TestCerts {
 public:
  static Result<std::unique_ptr<TestCerts>> Make() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/delayq-certs-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) return Internal("mkdtemp " + pattern + " failed");
    std::unique_ptr<TestCerts> c(new TestCerts(pattern));
    if (Status s = c->MakeAll(); !s.ok()) return s;
    return c;
  }
  ~TestCerts() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
  TestCerts(const TestCerts&) = delete;
  TestCerts& operator=(const TestCerts&) = delete;

  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  const std::string& dir() const { return dir_; }

  // Another server certificate and key signed by ca.pem, for `cn` (a reload
  // sees a new subject): <name>.pem, <name>.key.
  Status MakeServer(const std::string& name, const std::string& cn) {
    return Leaf(name, cn, "ca", "subjectAltName=DNS:localhost,IP:127.0.0.1");
  }

 private:
  explicit TestCerts(std::string dir) : dir_(std::move(dir)) {}

  Status Run(const std::string& command) const {
    std::string line = "cd '" + dir_ + "' && " + command + " >>openssl.log 2>&1";
    if (std::system(line.c_str()) != 0) {
      std::ifstream in(dir_ + "/openssl.log");
      std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return Internal("openssl failed: " + command + ": " + log.substr(0, 2000));
    }
    return Status::Ok();
  }
  Status Ca(const std::string& name, const std::string& cn) {
    return Run(
        "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
        "-keyout " +
        name + ".key -out " + name + ".pem -days 30 -subj '/CN=" + cn + "'");
  }
  Status Leaf(const std::string& name, const std::string& cn, const std::string& ca,
              const std::string& ext) {
    {
      std::ofstream out(dir_ + "/" + name + ".ext");
      out << ext << "\n";
    }
    if (Status s = Run("openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes "
                       "-keyout " +
                       name + ".key -out " + name + ".csr -subj '/CN=" + cn + "'");
        !s.ok()) {
      return s;
    }
    return Run("openssl x509 -req -in " + name + ".csr -CA " + ca + ".pem -CAkey " + ca +
               ".key -CAcreateserial -out " + name + ".pem -days 30 -extfile " + name + ".ext");
  }
  Status MakeAll() {
    if (Status s = Ca("ca", "delayq test CA"); !s.ok()) return s;
    if (Status s = Ca("other-ca", "another CA"); !s.ok()) return s;
    if (Status s = MakeServer("server", "localhost"); !s.ok()) return s;
    if (Status s = Run("cat ca.pem >> server.pem"); !s.ok()) return s;  // a chain
    if (Status s = Leaf("client", "worker", "ca", "extendedKeyUsage=clientAuth"); !s.ok()) {
      return s;
    }
    return Leaf("other-client", "stranger", "other-ca", "extendedKeyUsage=clientAuth");
  }

  std::string dir_;
};

}  // namespace delayq

#endif  // DELAYQ_TESTS_TESTING_TEST_CERTS_H_
