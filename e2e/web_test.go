// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestBasicAuth: --web.config.file is exporter-toolkit's; a wrong password
// gets 401, the right one the metrics.
func TestBasicAuth(t *testing.T) {
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("basic_auth_users:\n  prometheus: "+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := start(t, append(hostArgs(t, "dgx-h100"), "--web.config.file="+cfg)...)
	for _, tc := range []struct {
		user, pass string
		want       int
	}{
		{"", "", http.StatusUnauthorized},
		{"prometheus", "wrong", http.StatusUnauthorized},
		{"prometheus", "s3cret", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+e.addr+"/metrics", nil)
		if tc.user != "" {
			req.SetBasicAuth(tc.user, tc.pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("user %q password %q: HTTP %d, want %d", tc.user, tc.pass, resp.StatusCode, tc.want)
		}
	}
}

func TestBadWebConfig(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "web.yml")
	if err := os.WriteFile(cfg, []byte("tls_server_config:\n  cert_file: /nonexistent.pem\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runBinary(t, append(hostArgs(t, "dgx-h100"), "--web.listen-address=127.0.0.1:0", "--web.config.file="+cfg)...)
	if err == nil {
		t.Fatalf("started with a broken web config:\n%s", out)
	}
}
