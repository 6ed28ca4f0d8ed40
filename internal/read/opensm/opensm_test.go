// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package opensm

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// realConf is a recorded default configuration (testdata/README.md).
const realConf = "testdata/opensm-3.3.23-debian12-default.conf"

func readReal(t testing.TB) []byte {
	t.Helper()
	b, err := os.ReadFile(realConf)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseRealDefaultConfig parses the complete default configuration the
// real opensm 3.3.23 writes.
func TestParseRealDefaultConfig(t *testing.T) {
	c := ParseConfig("/etc/opensm/opensm.conf", readReal(t))
	if c.Malformed != 0 {
		t.Errorf("malformed lines %v", c.MalformedLines)
	}
	if want := []string{"cc_key", "m_key", "sa_key", "sm_key"}; !reflect.DeepEqual(c.Secrets, want) {
		t.Errorf("secrets = %v, want %v", c.Secrets, want)
	}
	for name, want := range map[string]string{
		"sm_priority": "0", "sweep_interval": "10", "lmc": "0", "guid": "0x0000000000000000",
		"subnet_prefix": "0xfe80000000000000", "log_file": "/var/log/opensm.log",
		"cc_ca_cong_setting_ccti_timer": "0 0", "m_key_lease_period": "0", "m_key_lookup": "TRUE",
	} {
		if got := c.Values[name]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, ok := c.Get("routing_engine"); ok {
		t.Error("routing_engine (null) should be unset")
	}
	if len(c.Values) < 150 {
		t.Errorf("only %d options parsed", len(c.Values))
	}
	for name := range c.Values {
		if IsSecret(name) {
			t.Errorf("secret option %s kept in Values", name)
		}
	}
	if g, _, err := c.GUID("subnet_prefix"); err != nil || g != "0xfe80000000000000" {
		t.Errorf("subnet_prefix = %q %v", g, err)
	}
	if v, ok, err := c.Int("sm_priority"); v != 0 || !ok || err != nil {
		t.Errorf("sm_priority = %d %v %v", v, ok, err)
	}
}

// secrets are unique strings that must never leave the parser.
var secrets = []string{"0x5ec7e7a1d0c0ffee", "0x5ec7e7a2d0c0ffee", "0x5ec7e7a3d0c0ffee", "0x5ec7e7a4d0c0ffee",
	"0x5ec7e7a5d0c0ffee", "0x5ec7e7a6d0c0ffee", "0x5ec7e7a7d0c0ffee", "5ec7e7a8"}

func leaked(dump string) []string {
	var out []string
	for _, s := range secrets {
		if strings.Contains(strings.ToLower(dump), strings.ToLower(s)) {
			out = append(out, s)
		}
	}
	return out
}

func dumps(v any) string {
	j, _ := json.Marshal(v)
	return fmt.Sprintf("%v\n%+v\n%#v\n%s", v, v, v, j)
}

// TestSecretsNeverKept: every secret, including those on lines the parser
// cannot understand, is absent from everything the parser returns.
func TestSecretsNeverKept(t *testing.T) {
	conf := strings.Join([]string{
		"m_key " + secrets[0],
		"sm_key\t" + secrets[1],
		"sa_key   " + secrets[2],
		"cc_key " + secrets[3],
		"m_key=" + secrets[4],      // malformed: no space
		"M_KEY:" + secrets[5] + "", // malformed name
		"vendor_key " + secrets[6], // unknown *_key: secret too
		"sm_key",                   // no value
		"sm_priority 14",
		"\t" + secrets[7] + "\t", // a stray value on a line of its own
	}, "\n")
	c := ParseConfig("/etc/rdma/opensm.conf", []byte(conf))
	d := dumps(c)
	if l := leaked(d); len(l) > 0 {
		t.Fatalf("secrets leaked: %v\n%s", l, d)
	}
	if c.Malformed != 4 || !reflect.DeepEqual(c.MalformedLines, []int{5, 6, 8, 10}) {
		t.Errorf("malformed = %d %v, want 4 [5 6 8 10]", c.Malformed, c.MalformedLines)
	}
	if want := []string{"cc_key", "m_key", "sa_key", "sm_key", "vendor_key"}; !reflect.DeepEqual(c.Secrets, want) {
		t.Errorf("secrets = %v, want %v", c.Secrets, want)
	}
	if v, _ := c.Get("m_key"); v != "" {
		t.Error("Get returned a secret")
	}

	sh := ParseShell("/etc/sysconfig/opensm", []byte("GUIDS=\"0x0002c903000e0b72\"\nPRIORITY=15\nSM_KEY="+secrets[0]+"\nexport CC_KEY='"+secrets[1]+"'\nbroken line "+secrets[2]+"\n"))
	if l := leaked(dumps(sh)); len(l) > 0 {
		t.Fatalf("shell file secrets leaked: %v", l)
	}
	if sh.Values["PRIORITY"] != "15" || sh.Values["GUIDS"] != "0x0002c903000e0b72" || sh.Malformed != 1 {
		t.Errorf("shell = %+v", sh)
	}

	for _, cmd := range []string{
		"/usr/sbin/opensm\x00--smkey\x00" + secrets[0] + "\x00-F\x00/etc/rdma/opensm.conf\x00",
		"/usr/sbin/opensm\x00-k" + secrets[1] + "\x00--cc_key=" + secrets[2] + "\x00-p\x0014\x00",
		"/usr/sbin/opensm\x00--cc_key\x00" + secrets[3] + "\x00-g\x00" + secrets[4] + "zz\x00",
		"/usr/sbin/opensm\x00-k\x00",
	} {
		p := ParseCmdline(1, []byte(cmd))
		if l := leaked(dumps(p)); len(l) > 0 {
			t.Errorf("cmdline %q leaked %v: %+v", cmd, l, p)
		}
	}
}

func TestParseCmdline(t *testing.T) {
	tests := []struct {
		in   string
		want Process
	}{
		// Debian 12 opensm@.service
		{"/usr/sbin/opensm\x00--guid\x000x0002c903000e0b72\x00--log_file\x00/var/log/opensm.0x0002c903000e0b72.log\x00",
			Process{PID: 7, GUID: "0x0002c903000e0b72", Priority: -1, LogFile: "/var/log/opensm.0x0002c903000e0b72.log"}},
		// Debian init script: -g PORT -f LOG
		{"/usr/sbin/opensm\x00-g\x000x2c903000e0b72\x00-f\x00/var/log/opensm.0x2c903000e0b72.log\x00",
			Process{PID: 7, GUID: "0x0002c903000e0b72", Priority: -1, LogFile: "/var/log/opensm.0x2c903000e0b72.log"}},
		{"opensm\x00-F/etc/rdma/opensm.conf\x00-p14\x00-B\x00",
			Process{PID: 7, ConfigFile: "/etc/rdma/opensm.conf", Priority: 14}},
		{"opensm\x00--config=/etc/opensm/opensm.conf\x00--priority=3\x00-R\x00-F\x00",
			Process{PID: 7, ConfigFile: "/etc/opensm/opensm.conf", Priority: 3}},
		{"opensm\x00-p\x0099\x00", Process{PID: 7, Priority: -1, Malformed: true}},
		{"opensm\x00-F\x00", Process{PID: 7, Priority: -1, Malformed: true}},
		{"", Process{PID: 7, Priority: -1}},
	}
	for _, tt := range tests {
		if got := ParseCmdline(7, []byte(tt.in)); got != tt.want {
			t.Errorf("ParseCmdline(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
}

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestRead(t *testing.T) {
	root := writeTree(t, map[string]string{
		"proc/1/comm":                  "systemd\n",
		"proc/1/cmdline":               "/sbin/init\x00",
		"proc/812/comm":                "opensm\n",
		"proc/812/cmdline":             "/usr/sbin/opensm\x00-F\x00/srv/sm/opensm.conf\x00",
		"proc/900/comm":                "opensm-launch\n",
		"proc/self/comm":               "opensm\n", // not a pid
		"srv/sm/opensm.conf":           "sm_priority 9\n",
		"etc/rdma/opensm.conf":         "sm_priority 1\n",
		"etc/default/opensm":           "PORTS=ALL\n",
		"etc/opensm/opensm.conf.dpkg-": "x",
	})
	r, p := hostfs.Dir(root), hostfs.Dir(filepath.Join(root, "proc"))
	st, err := Read(context.Background(), r, p, "", time.Now(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Running() || len(st.Processes) != 1 || st.Processes[0].PID != 812 {
		t.Fatalf("processes = %+v", st.Processes)
	}
	if st.Config == nil || st.Config.Path != "/srv/sm/opensm.conf" || st.Config.Values["sm_priority"] != "9" {
		t.Errorf("config = %+v, want the file the process names", st.Config)
	}
	if len(st.Shell) != 1 || st.Shell[0].Path != "/etc/default/opensm" || st.Shell[0].Values["PORTS"] != "ALL" {
		t.Errorf("shell = %+v", st.Shell)
	}

	// No process: the first candidate that exists.
	st, err = Read(context.Background(), r, hostfs.Dir(filepath.Join(root, "nope")), "", time.Now(), nil)
	if err != nil || st.Running() || st.Config == nil || st.Config.Path != "/etc/rdma/opensm.conf" {
		t.Errorf("no process: %+v %v", st, err)
	}
	// An override that does not exist is an error; nothing is guessed.
	st, err = Read(context.Background(), r, hostfs.Dir(filepath.Join(root, "nope")), "/etc/missing.conf", time.Now(), nil)
	if err == nil || st.Config != nil {
		t.Errorf("missing override: %+v %v", st.Config, err)
	}
	if _, err := Read(context.Background(), r, p, "/etc/../proc/1/comm", time.Now(), nil); err == nil {
		t.Error("a path with .. was read")
	}
}

func FuzzParseConfig(f *testing.F) {
	f.Add(readReal(f))
	f.Add([]byte("m_key 0x1\nsm_key=2\n\tsa_key\t3\n# c\nguid 0x0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := ParseConfig("/x", b)
		for name := range c.Values {
			if IsSecret(name) || !validName(name) {
				t.Fatalf("kept %q", name)
			}
		}
		for _, s := range c.Secrets {
			if !IsSecret(s) {
				t.Fatalf("secret list has %q", s)
			}
		}
	})
}

func FuzzParseShell(f *testing.F) {
	f.Add([]byte("PORTS=ALL\n#PORTS=\"0x0002c9030002fce9 0x0002c9030002fb06\"\n"))
	f.Add([]byte("GUIDS=\"0x1 0x2\"\nPRIORITY='15'\nexport SM_KEY=1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := ParseShell("/x", b)
		for name := range c.Values {
			if IsSecret(name) || !validName(name) {
				t.Fatalf("kept %q", name)
			}
		}
	})
}

func FuzzParseCmdline(f *testing.F) {
	f.Add([]byte("/usr/sbin/opensm\x00--guid\x000x0002c903000e0b72\x00--log_file\x00/var/log/opensm.log\x00"))
	f.Add([]byte("opensm\x00-F/etc/rdma/opensm.conf\x00-p14\x00--smkey\x00SECRET\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		p := ParseCmdline(1, b)
		if p.Priority < -1 || p.Priority > 15 {
			t.Fatalf("priority %d", p.Priority)
		}
		// The value after a secret option is never kept anywhere.
		args := strings.Split(string(b), "\x00")
		for i := 1; i+1 < len(args); i++ {
			if (args[i] == "--smkey" || args[i] == "-k" || args[i] == "--cc_key") && len(args[i+1]) > 3 {
				v := args[i+1]
				if strings.Contains(p.ConfigFile+p.GUID+p.LogFile, v) && !otherwiseThere(args, i+1, v) {
					t.Fatalf("secret %q kept: %+v", v, p)
				}
			}
		}
	})
}

// otherwiseThere: the value also appears as another argument, which the
// parser may legitimately keep.
func otherwiseThere(args []string, skip int, v string) bool {
	for j, a := range args {
		if j != skip && strings.Contains(a, v) {
			return true
		}
	}
	return false
}
