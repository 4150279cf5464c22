package delayq

// TLS to the servers (their --tls-cert-file; docs/api.md "TLS"), as the C++ client's options
// (include/delayq/options.h: tls, tls_ca_file, tls_cert_file, tls_key_file) and the delayq
// command's --tls --cacert --cert --key with DELAYQ_TLS, DELAYQ_CACERT, DELAYQ_CERT and
// DELAYQ_KEY. The files are read once, by New; every connection to every server shares the
// result, each checking the certificate against the host of its own address.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
)

// tlsFile is one of the file options and where its value came from, for messages.
type tlsFile struct {
	value   *string
	name    string // as the errors name it: tls_ca_file, ...
	env     string
	fromEnv bool
}

func (f *tlsFile) label() string {
	if f.fromEnv {
		return f.name + " ($" + f.env + ")"
	}
	return f.name
}

// tlsConfig fills o's TLS fields left unset from the environment, as the delayq command does
// (an empty variable counts as unset; DELAYQ_TLS is on unless 0, no or false), and makes the
// config the connections share: nil when TLS is off. Errors: ErrInvalidArgument naming the
// option at fault (a file without TLS on, a certificate without its key, a file that cannot be
// read).
func tlsConfig(o *Options) (*tls.Config, error) {
	if v := os.Getenv("DELAYQ_TLS"); !o.TLS && v != "" {
		o.TLS = v != "0" && v != "no" && v != "false"
	}
	files := []tlsFile{
		{value: &o.TLSCAFile, name: "tls_ca_file", env: "DELAYQ_CACERT"},
		{value: &o.TLSCertFile, name: "tls_cert_file", env: "DELAYQ_CERT"},
		{value: &o.TLSKeyFile, name: "tls_key_file", env: "DELAYQ_KEY"},
	}
	for i := range files {
		f := &files[i]
		if v := os.Getenv(f.env); *f.value == "" && v != "" {
			*f.value, f.fromEnv = v, true
		}
	}
	if !o.TLS {
		for i := range files {
			if *files[i].value != "" {
				return nil, invalid(files[i].label() +
					" given without tls (Options.TLS or DELAYQ_TLS=1): it is for TLS only")
			}
		}
		return nil, nil
	}
	ca, cert, key := &files[0], &files[1], &files[2]
	if *cert.value != "" && *key.value == "" {
		return nil, invalid(cert.label() + " given without tls_key_file: the certificate needs its key")
	}
	if *key.value != "" && *cert.value == "" {
		return nil, invalid(key.label() + " given without tls_cert_file: the key needs its certificate")
	}
	// TLS 1.2 and 1.3, as the server speaks.
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if *ca.value != "" {
		pem, err := os.ReadFile(*ca.value)
		if err != nil {
			return nil, invalid(fmt.Sprintf("%s: cannot read %s: %v", ca.label(), *ca.value, unwrapPath(err)))
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, invalid(fmt.Sprintf("%s: no PEM certificate in %s", ca.label(), *ca.value))
		}
	} // else nil RootCAs: the system's trust store
	if *cert.value != "" {
		pair, err := tls.LoadX509KeyPair(*cert.value, *key.value)
		if err != nil {
			return nil, invalid(fmt.Sprintf("%s, %s: cannot load %s with %s: %v", cert.label(),
				key.label(), *cert.value, *key.value, unwrapPath(err)))
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

// unwrapPath drops the *os.PathError's repetition of the file name.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// serverTLS is cfg for the server at addr: its certificate checked against addr's host, a DNS
// name or an IP address (crypto/tls checks an IP against the certificate's IP SANs).
func serverTLS(cfg *tls.Config, addr string) *tls.Config {
	if cfg == nil {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil { // parseServers made addr: not reached
		host = addr
	}
	c := cfg.Clone()
	c.ServerName = host
	return c
}
