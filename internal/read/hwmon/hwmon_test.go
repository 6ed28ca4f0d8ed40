// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package hwmon

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs/hostfstest"
)

// render prints a snapshot one sensor a line: device label input crit
// highest, "-" for an absent value.
func render(s *Snapshot) string {
	opt := func(o Opt[float64]) string {
		if !o.OK {
			return "-"
		}
		return fmt.Sprint(o.V)
	}
	var b strings.Builder
	for _, d := range s.Devices {
		for _, sn := range d.Sensors {
			fmt.Fprintf(&b, "%s %s %s %s %s %s\n", d.Name, sn.Chip, sn.Label, opt(sn.Input), opt(sn.Crit), opt(sn.Highest))
		}
	}
	return b.String()
}

// The GB300 fixture carries the recorded mlx5 sensor sets
// (fixtures/recorded/hwmon-mlx5-temperatures.txt): an ASIC and a module,
// a firmware that names no sensor ("sensor0"), a recording without
// temp1_highest; the BlueField-3 function has no hwmon at all.
func TestReadGB300(t *testing.T) {
	h := hostfstest.Fixture(t, "gb300-xdr")
	s, err := Read(context.Background(), h.Sys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `ibP16p3s0 mlx5 sensor0 68 105 68
ibP18p3s0 mlx5 asic 46 105 -
ibP2p3s0 mlx5 asic 57 105 58
ibp3s0 mlx5 asic 46 105 47
ibp3s0 mlx5 Module0 57 70 58
`
	if got := render(s); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if len(s.Errors) != 0 {
		t.Errorf("errors: %v", s.Errors)
	}
}

// broken: an unparseable input leaves that value out and is one error
// naming the file, the same sensor's threshold and peak stay; a module
// sensor reading 0 (mlx5's "no reading") is no sensor and no error.
func TestReadBroken(t *testing.T) {
	h := hostfstest.Fixture(t, "broken")
	s, err := Read(context.Background(), h.Sys, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := `mlx5_2 mlx5 asic - 105 47
mlx5_3 mlx5 asic 46 105 47
`
	if got := render(s); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if len(s.Errors) != 1 || !strings.Contains(s.Errors[0].Error(), "mlx5_2/device/hwmon/hwmon0/temp1_input") {
		t.Errorf("errors: %v, want one naming mlx5_2's temp1_input", s.Errors)
	}
}

// An excluded device's hwmon files are never touched: on mlx5 each read
// is a firmware command.
func TestReadHonoursFilter(t *testing.T) {
	h := hostfstest.Fixture(t, "gb300-xdr")
	f := &hostfstest.Faulty{Base: h.Sys}
	s, err := Read(context.Background(), f, Options{Keep: func(n string) bool { return n != "ibp3s0" }})
	if err != nil {
		t.Fatal(err)
	}
	if n := f.Reads("class/infiniband/ibp3s0/device/hwmon"); n != 0 {
		t.Errorf("excluded device's hwmon/ listed %d times", n)
	}
	if n := f.Reads("class/infiniband/ibp3s0/device/hwmon/hwmon0/temp1_input"); n != 0 {
		t.Errorf("excluded device's temp1_input read %d times", n)
	}
	for _, d := range s.Devices {
		if d.Name == "ibp3s0" {
			t.Error("excluded device reported")
		}
	}
	if len(s.Devices) != 3 {
		t.Errorf("%d devices, want the other 3", len(s.Devices))
	}
}

// A sensor read that fails (a firmware command error) loses that value
// and is counted; ENODATA, the hwmon way of saying "no value now", is not
// an error.
func TestReadErrors(t *testing.T) {
	h := hostfstest.Fixture(t, "gb300-xdr")
	base := "class/infiniband/ibp3s0/device/hwmon/hwmon0/"
	f := &hostfstest.Faulty{Base: h.Sys, Errors: map[string]error{
		base + "temp1_input": syscall.EIO,
		base + "temp2_input": syscall.ENODATA,
	}}
	s, err := Read(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := render(s)
	for _, line := range []string{"ibp3s0 mlx5 asic - 105 47\n", "ibp3s0 mlx5 Module0 - 70 58\n"} {
		if !strings.Contains(got, line) {
			t.Errorf("missing %q in\n%s", line, got)
		}
	}
	if len(s.Errors) != 1 || !errors.Is(s.Errors[0], syscall.EIO) {
		t.Errorf("errors %v, want the one EIO", s.Errors)
	}
}

// Two sensors that share a label within one device stay two series.
func TestDuplicateLabels(t *testing.T) {
	h := hostfstest.Fixture(t, "gb300-xdr")
	base := "class/infiniband/ibp3s0/device/hwmon/hwmon0/"
	f := &hostfstest.Faulty{Base: h.Sys, Contents: map[string][]byte{base + "temp2_label": []byte("asic\n")}}
	s, err := Read(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := render(s); !strings.Contains(got, "ibp3s0 mlx5 asic/temp2 57 70 58\n") {
		t.Errorf("second asic not told apart:\n%s", got)
	}
}

// A label that cannot be a label value drops that sensor with an error;
// the device's other sensors stay.
func TestBadLabel(t *testing.T) {
	h := hostfstest.Fixture(t, "gb300-xdr")
	base := "class/infiniband/ibp3s0/device/hwmon/hwmon0/"
	f := &hostfstest.Faulty{Base: h.Sys, Contents: map[string][]byte{base + "temp2_label": []byte("Module\x00\x01\n")}}
	s, err := Read(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := render(s)
	if strings.Contains(got, "Module") || !strings.Contains(got, "ibp3s0 mlx5 asic 46 105 47\n") {
		t.Errorf("got\n%s", got)
	}
	if len(s.Errors) != 1 {
		t.Errorf("errors: %v", s.Errors)
	}
}

func TestParseMillidegrees(t *testing.T) {
	for in, want := range map[string]float64{"68000\n": 68, "-5500\n": -5.5, "0\n": 0, "105000": 105} {
		if v, err := ParseMillidegrees(in); err != nil || v != want {
			t.Errorf("%q: %v, %v; want %v", in, v, err, want)
		}
	}
	for _, in := range []string{"", "\n", "garbage\n", "68.5\n", "99999999999999999999\n", "2000000\n"} {
		if v, err := ParseMillidegrees(in); err == nil {
			t.Errorf("%q: %v, want an error", in, v)
		}
	}
}

func TestInputChannel(t *testing.T) {
	for in, want := range map[string]int{"temp1_input": 1, "temp12_input": 12} {
		if n, ok := inputChannel(in); !ok || n != want {
			t.Errorf("%s: %d %v", in, n, ok)
		}
	}
	for _, in := range []string{"temp0_input", "temp01_input", "temp1_crit", "tempx_input", "in0_input", "temp_input"} {
		if _, ok := inputChannel(in); ok {
			t.Errorf("%s accepted", in)
		}
	}
}

func FuzzParseMillidegrees(f *testing.F) {
	hostfstest.Seeds(f, "*/sys/class/hwmon/*/temp*")
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseMillidegrees(s)
		if err == nil && (v < -1000 || v > 1000) {
			t.Errorf("%q: %v out of range", s, v)
		}
	})
}

// BenchmarkReadGB300 is the cost of one read of the GB300 fixture (four
// functions, five sensors, fifteen value files) on a plain file system:
// the sysfs walk, not the firmware commands a real mlx5 answers them with.
func BenchmarkReadGB300(b *testing.B) {
	h := hostfstest.Fixture(b, "gb300-xdr")
	for b.Loop() {
		if _, err := Read(context.Background(), h.Sys, Options{}); err != nil {
			b.Fatal(err)
		}
	}
}
