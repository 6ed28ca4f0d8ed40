// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package report

import (
	"bytes"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
)

// NewHandler serves the latest report: ?format=text|json|html|nhc, else
// the Accept header (application/json, text/html), else text. The text
// shows the problems and their details; ?verbose=1 adds every pass and
// skip. It only reads the report; it never touches the host.
func NewHandler(latest func() *diagnose.Report) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		format, ok := negotiate(r)
		if !ok {
			http.Error(w, fmt.Sprintf("unknown format %q; formats: %s", r.URL.Query().Get("format"), strings.Join(Formats, ", ")), http.StatusBadRequest)
			return
		}
		verbose, ok := verboseParam(r)
		if !ok {
			http.Error(w, fmt.Sprintf("verbose=%q: want 1 or 0 (true or false)", r.URL.Query().Get("verbose")), http.StatusBadRequest)
			return
		}
		rep := latest()
		if rep == nil {
			http.Error(w, "no diagnosis yet: the first sample is still running", http.StatusServiceUnavailable)
			return
		}
		var b bytes.Buffer
		if err := Render(&b, rep, format, View{Verbose: verbose, VerboseHint: "?verbose=1"}); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		h := w.Header()
		h.Set("Content-Type", ContentType(format))
		h.Set("Cache-Control", "no-store")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Add("Vary", "Accept")
		if format == "html" {
			// The page is self-contained; the policy makes a browser refuse
			// (and report) anything that would load from elsewhere.
			h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
		}
		h.Set("Content-Length", strconv.Itoa(b.Len()))
		if r.Method == http.MethodHead {
			return
		}
		_, _ = w.Write(b.Bytes())
	})
}

// verboseParam reads ?verbose: absent is false, bare "?verbose" true,
// else a boolean (1, 0, true, false).
func verboseParam(r *http.Request) (verbose, ok bool) {
	q := r.URL.Query()
	if !q.Has("verbose") {
		return false, true
	}
	v := q.Get("verbose")
	if v == "" {
		return true, true
	}
	b, err := strconv.ParseBool(v)
	return b, err == nil
}

// negotiate picks the format: the query parameter wins; then the Accept
// media type with the highest q among JSON, HTML and plain text.
func negotiate(r *http.Request) (string, bool) {
	if q := r.URL.Query(); q.Has("format") {
		f := q.Get("format")
		return f, slices.Contains(Formats, f)
	}
	best, bestQ := "text", 0.0
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
		if err != nil {
			continue
		}
		q := 1.0
		if v, ok := params["q"]; ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		var f string
		switch mt {
		case "application/json":
			f = "json"
		case "text/html", "application/xhtml+xml":
			f = "html"
		case "text/plain":
			f = "text"
		default:
			continue
		}
		if q > bestQ {
			best, bestQ = f, q
		}
	}
	return best, true
}
