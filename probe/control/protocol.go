// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package control is the channel between a prober and a peer's responder.
// Over it the prober asks the peer to start the perftest server that
// matches its client (so probing needs no ssh), or to answer the TCP
// transport probe on the same connection.
//
// The channel is one TCP connection of JSON lines, authenticated both ways
// with HMAC-SHA256 over a shared secret (probe.secret_file):
//
//	responder → prober   {"v":1,"challenge":"<32 random bytes, hex>"}
//	prober → responder   {"body":{"nonce":"<hex>","test":...},"mac":"<hex>"}
//	                     mac = HMAC(secret, "rdma_doctor-probe-request\n" challenge "\n" body)
//	responder → prober   {"body":{"ok":true,"port":18517,...},"mac":"<hex>"}
//	                     mac = HMAC(secret, "rdma_doctor-probe-response\n" nonce "\n" body)
//
// The fresh challenge makes every request good for one connection only (a
// recorded request cannot be replayed), and the response MAC over the
// prober's nonce proves the answer comes from a holder of the secret. The
// secret never crosses the wire. Nothing is encrypted: the channel carries
// test parameters and results, not secrets.
package control

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Version is the protocol version; a responder refuses others.
const Version = 1

// MinSecretLen is the shortest secret accepted, in bytes.
const MinSecretLen = 16

// maxLine bounds one protocol line: an unauthenticated peer must not make
// the responder buffer without limit.
const maxLine = 64 << 10

// Hello is the responder's first line.
type Hello struct {
	V         int    `json:"v"`
	Challenge string `json:"challenge"`
}

// Request is what the prober asks for.
type Request struct {
	Nonce string `json:"nonce"`
	// Test is a perftest test (ib_write_lat, ...) or tcp_lat / tcp_bw.
	Test string `json:"test"`
	// Device is the responder's device to use; empty: its first.
	Device     string        `json:"device,omitempty"`
	Size       int           `json:"size,omitempty"`
	Iterations int           `json:"iterations,omitempty"`
	Duration   time.Duration `json:"duration,omitempty"`
}

// Response answers a request, and for perftest tests a second Response
// reports how the server side ended (Done set).
type Response struct {
	OK bool `json:"ok"`
	// Kind classifies a refusal or failure: unauthorized, forbidden,
	// invalid, busy, or a perftest error kind (no_device, port_down, ...).
	Kind  string `json:"kind,omitempty"`
	Error string `json:"error,omitempty"`
	// Port is the TCP port the perftest server listens on.
	Port int `json:"port,omitempty"`
	// Done marks the final message after a perftest run: the server's exit
	// and, when it failed, its error kind.
	Done     bool  `json:"done,omitempty"`
	ExitCode int   `json:"exit_code,omitempty"`
	CPUNanos int64 `json:"cpu_ns,omitempty"`
}

// Refusal kinds.
const (
	KindUnauthorized = "unauthorized"
	KindForbidden    = "forbidden"
	KindInvalid      = "invalid"
	KindBusy         = "busy"
	KindProtocol     = "protocol"
)

// RemoteError is a refusal or failure the responder reported.
type RemoteError struct {
	Kind string
	Msg  string
}

func (e *RemoteError) Error() string { return "responder: " + e.Kind + ": " + e.Msg }

// envelope carries a body and its MAC.
type envelope struct {
	Body json.RawMessage `json:"body"`
	MAC  string          `json:"mac"`
}

const (
	requestDomain  = "rdma_doctor-probe-request\n"
	responseDomain = "rdma_doctor-probe-response\n"
)

func mac(secret []byte, domain, bind string, body []byte) string {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(domain))
	h.Write([]byte(bind))
	h.Write([]byte{'\n'})
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

func verify(secret []byte, domain, bind string, e envelope) bool {
	want := mac(secret, domain, bind, e.Body)
	return hmac.Equal([]byte(want), []byte(strings.ToLower(e.MAC)))
}

func randomHex() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

// writeLine writes v as one JSON line.
func writeLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// readLine reads one JSON line of at most maxLine bytes into v.
func readLine(r *bufio.Reader, v any) error {
	var line []byte
	for {
		chunk, isPrefix, err := r.ReadLine()
		if err != nil {
			return err
		}
		line = append(line, chunk...)
		if len(line) > maxLine {
			return errors.New("control: line too long")
		}
		if !isPrefix {
			break
		}
	}
	if err := json.Unmarshal(line, v); err != nil {
		return fmt.Errorf("control: %w", err)
	}
	return nil
}

// LoadSecret reads the shared secret. Surrounding whitespace is dropped (a
// trailing newline from echo or base64). It returns a warning, not an
// error, when others can read the file.
func LoadSecret(path string) (secret []byte, warning string, err error) {
	if path == "" {
		return nil, "", errors.New("probe.secret_file is not set")
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, "", fmt.Errorf("probe secret: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("probe secret: %w", err)
	}
	s := []byte(strings.TrimSpace(string(b)))
	if len(s) < MinSecretLen {
		return nil, "", fmt.Errorf("probe secret %s: %d bytes, want at least %d (head -c 32 /dev/urandom | base64 > %s)", path, len(s), MinSecretLen, path)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		warning = fmt.Sprintf("probe secret %s is readable by others (mode %04o); chmod 600 it", path, fi.Mode().Perm())
	}
	return s, warning, nil
}
