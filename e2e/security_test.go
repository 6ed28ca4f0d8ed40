// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key,
// and returns their paths and a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "rdma_doctor e2e"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// TestTLS: --web.config.file with tls_server_config serves HTTPS to a
// client that trusts the certificate; a plain HTTP request to the same
// listener gets no metrics, and a client that does not trust the
// certificate fails the handshake.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	cfg := filepath.Join(dir, "web.yml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\n", certFile, keyFile)), 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, append(hostArgs(t, "dgx-h100"), "--web.config.file="+cfg)...)

	tlsClient := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	resp, err := tlsClient.Get("https://" + e.addr + "/metrics")
	if err != nil {
		t.Fatalf("HTTPS: %v\n%s", err, e.stderr.String())
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "rdma_port_state") {
		t.Errorf("HTTPS /metrics: HTTP %d, %d bytes without rdma_port_state", resp.StatusCode, len(body))
	}
	if resp.TLS == nil {
		t.Error("HTTPS answer without TLS state")
	}

	plain := &http.Client{Timeout: 30 * time.Second}
	resp, err = plain.Get("http://" + e.addr + "/metrics")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(body), "rdma_") {
			t.Errorf("plain HTTP to the TLS listener: HTTP %d\n%.300s", resp.StatusCode, body)
		}
	}

	untrusting := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{}}
	if resp, err := untrusting.Get("https://" + e.addr + "/metrics"); err == nil {
		resp.Body.Close()
		t.Error("a client without the certificate in its roots completed the handshake")
	}
}

// treeDigest hashes every path, mode, symlink target and file content
// under root (the fixture host), to prove that nothing changed it.
func treeDigest(t *testing.T, root string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fmt.Fprintf(h, "%s %v %d\n", rel, info.Mode(), info.ModTime().UnixNano())
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "-> %s\n", target)
		case info.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// TestNoEndpointChangesTheHost: every method but GET and HEAD gets 405 on
// every page, GET and HEAD work, and after all of it the fixture host's
// tree (contents, modes, modification times, links) is byte-identical.
func TestNoEndpointChangesTheHost(t *testing.T) {
	root := filepath.Join(repoRoot(t), "fixtures", "hosts", "dgx-h100")
	before := treeDigest(t, root)
	e := start(t, hostArgs(t, "dgx-h100")...)
	client := &http.Client{Timeout: 30 * time.Second}
	pages := []string{"/", "/metrics", "/diagnose", "/diagnose?format=json", "/diagnose?format=html", "/diagnose?format=nhc", "/probe", "/nonexistent"}
	for _, page := range pages {
		for _, method := range []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodPatch, http.MethodOptions, "TRACE"} {
			req, _ := http.NewRequest(method, "http://"+e.addr+page, strings.NewReader("x=1"))
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", method, page, err)
			}
			resp.Body.Close()
			want := http.StatusOK
			switch {
			case method != http.MethodGet && method != http.MethodHead:
				want = http.StatusMethodNotAllowed
			case page == "/nonexistent":
				want = http.StatusNotFound
			}
			if resp.StatusCode != want {
				t.Errorf("%s %s: HTTP %d, want %d", method, page, resp.StatusCode, want)
			}
			if want == http.StatusMethodNotAllowed && resp.Header.Get("Allow") != "GET, HEAD" {
				t.Errorf("%s %s: Allow %q", method, page, resp.Header.Get("Allow"))
			}
		}
	}
	if after := treeDigest(t, root); after != before {
		t.Errorf("the fixture host tree changed while its pages were served")
	}
}

// TestRequestLimits: a request header over --web's 64 KiB limit is refused
// with 431 before any handler runs, and the server still answers after it.
func TestRequestLimits(t *testing.T) {
	e := start(t, hostArgs(t, "dgx-h100")...)
	req, _ := http.NewRequest(http.MethodGet, "http://"+e.addr+"/metrics", nil)
	req.Header.Set("X-Big", strings.Repeat("a", 256<<10))
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("256 KiB header: HTTP %d, want 431", resp.StatusCode)
	}
	if code, _ := e.get(t, "/metrics"); code != http.StatusOK {
		t.Errorf("after the big header: HTTP %d", code)
	}
}
