// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package config loads the optional --config.file: what the operator expects
// of this host (link rates) and, later, thresholds and probe peers. Every
// setting has a default that works without a file.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
)

// Config is the whole configuration file.
type Config struct {
	Expected Expected `yaml:"expected"`
	// Diagnose configures the rule checks (diagnose.go).
	Diagnose Diagnose `yaml:"diagnose"`
	// Probe configures the verbs probe, the TCP transport probe and the
	// responder (probe.go).
	Probe Probe `yaml:"probe"`
	// Tuning configures the tuning collector (tuning.go).
	Tuning Tuning `yaml:"tuning"`
}

// Expected holds what the operator expects of the host's links. The most
// specific match wins: a device/port entry, then board_id, then hca_type.
type Expected struct {
	Ports    []PortRate    `yaml:"ports"`
	Boards   []BoardRate   `yaml:"boards"`
	HCATypes []HCATypeRate `yaml:"hca_types"`
}

// PortRate implements infiniband.RateRules: the most specific entry wins, a
// device/port entry, then board_id, then hca_type. A nil Config has none.
func (c *Config) PortRate(device string, port int, boardID, hcaType string) (float64, infiniband.ExpectedSource, bool) {
	if c == nil {
		return 0, "", false
	}
	for _, e := range c.Expected.Ports {
		if e.Device == device && e.Port == port {
			return e.RateGbps, infiniband.FromConfigPort, true
		}
	}
	if boardID != "" {
		for _, e := range c.Expected.Boards {
			if e.BoardID == boardID {
				return e.RateGbps, infiniband.FromConfigBoard, true
			}
		}
	}
	if hcaType != "" {
		for _, e := range c.Expected.HCATypes {
			if e.HCAType == hcaType {
				return e.RateGbps, infiniband.FromConfigHCAType, true
			}
		}
	}
	return 0, "", false
}

// PortRate is the expected rate of one port.
type PortRate struct {
	Device   string  `yaml:"device"`
	Port     int     `yaml:"port"`
	RateGbps float64 `yaml:"rate_gbps"`
}

// BoardRate is the expected rate of every port of a board (PSID).
type BoardRate struct {
	BoardID  string  `yaml:"board_id"`
	RateGbps float64 `yaml:"rate_gbps"`
}

// HCATypeRate is the expected rate of every port of an HCA model ("MT4123").
type HCATypeRate struct {
	HCAType  string  `yaml:"hca_type"`
	RateGbps float64 `yaml:"rate_gbps"`
}

// MaxFileSize bounds the configuration file. The longest real one lists
// a port per device and a few probe peers: kilobytes. A file past this is
// not a configuration, and YAML's decoder would spend seconds and hundreds
// of MB on it (docs/measurements.md#config).
const MaxFileSize = 1 << 20

// DefaultFile is the config file every command reads when --config.file
// is not given: etc/rdma_doctor/rdma_doctor.yml below the root file
// system, if it exists. So serve, diagnose and remediate judge a host (a
// fixture host included) by the same expectations.
func DefaultFile(rootfs string) string {
	p := filepath.Join(rootfs, "etc", "rdma_doctor", "rdma_doctor.yml")
	if _, err := os.Lstat(p); err != nil {
		return ""
	}
	return p
}

// Load reads and validates a configuration file. An empty path gives the
// defaults.
func Load(path string) (*Config, error) {
	if path == "" {
		return &Config{}, nil
	}
	b, err := hostfs.ReadBounded(path, MaxFileSize)
	if err != nil {
		return nil, fmt.Errorf("config file: %w", err)
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("config file %s: %s", path, oneLine(err))
	}
	return c, nil
}

// oneLine renders a decoding error on one line for a start-up error and a
// log: yaml.v3 puts each of several problems on an indented line after
// "yaml: unmarshal errors:", and prefixes syntax errors with "yaml: ".
func oneLine(err error) string {
	var te *yaml.TypeError
	if errors.As(err, &te) {
		return strings.Join(te.Errors, "; ")
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", "; ")), " ")
}

// Parse decodes and validates configuration YAML. Unknown keys are errors: a
// misspelt expectation must not silently become no expectation.
func Parse(b []byte) (*Config, error) {
	c := &Config{}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return c, nil // an empty file: the defaults
		}
		return nil, err
	}
	// Unknown keys first, with the valid ones and a suggestion; the
	// sections that decode themselves check their own.
	if len(doc.Content) > 0 {
		if err := checkKnown(doc.Content[0], reflect.TypeOf(c)); err != nil {
			return nil, err
		}
	}
	if err := doc.Decode(c); err != nil {
		return nil, err
	}
	return c, c.validate()
}

func (c *Config) validate() error {
	for i, p := range c.Expected.Ports {
		if p.Device == "" || p.Port < 1 {
			return fmt.Errorf("expected.ports[%d]: device and port (>= 1) are required", i)
		}
		if err := validRate(p.RateGbps); err != nil {
			return fmt.Errorf("expected.ports[%d]: %w", i, err)
		}
	}
	for i, b := range c.Expected.Boards {
		if b.BoardID == "" {
			return fmt.Errorf("expected.boards[%d]: board_id is required", i)
		}
		if err := validRate(b.RateGbps); err != nil {
			return fmt.Errorf("expected.boards[%d]: %w", i, err)
		}
	}
	for i, h := range c.Expected.HCATypes {
		if h.HCAType == "" {
			return fmt.Errorf("expected.hca_types[%d]: hca_type is required", i)
		}
		if err := validRate(h.RateGbps); err != nil {
			return fmt.Errorf("expected.hca_types[%d]: %w", i, err)
		}
	}
	return nil
}

func validRate(g float64) error {
	if g <= 0 || g > 10000 {
		return fmt.Errorf("rate_gbps %v: want a rate in Gb/s between 0 and 10000", g)
	}
	return nil
}
