// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

// Package hwmon reads the temperature sensors the kernel's hardware
// monitoring class registers under an RDMA device's PCI function
// (class/infiniband/<dev>/device/hwmon/hwmon<N>/temp<I>_{input,crit,
// highest,label}). mlx5 registers one such hwmon device per PCI function
// since Linux 6.6 (commit "net/mlx5: Expose NIC temperature via hardware
// monitoring kernel API"): the ASIC's sensors and, when a module with a
// thermal sensor is plugged, that module's ("asic", "Module0", or
// "sensor<index>" on firmware that names none). Other RDMA drivers that
// register a hwmon device on their PCI function (bnxt_en, ice) are read
// the same way.
//
// Cost: on mlx5 every read of every temp file is one MTMP access-register
// command to the firmware (hwmon.c, mlx5_hwmon_read), so the host package
// reads this source on the slow interval, not on every scrape.
package hwmon

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
	"github.com/rdma-doctor/rdma_doctor/internal/read/infiniband"
	"github.com/rdma-doctor/rdma_doctor/internal/read/names"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sysattr"
)

// Opt is a value that may be missing; a missing value is never zero.
type Opt[T any] = sysattr.Opt[T]

// Limits on what one device's hwmon directories may hold: mlx5 has one
// hwmon device per function with at most 64 ASIC sensors plus one module
// (the MTCAP sensor map is 64 bits); anything far beyond is not a NIC.
const (
	maxHwmonDirs = 8
	maxSensors   = 128
)

// driverMlx5 is the name mlx5 gives its hwmon device.
const driverMlx5 = "mlx5"

// Sensor is one temperature sensor of an RDMA device.
type Sensor struct {
	// Label is the sensor's temp<I>_label, or "temp<I>" when the driver
	// gives none (the hwmon convention, as sensors(1) prints it). Unique
	// within a device: a second sensor of the same label gets its
	// channel appended ("asic/temp3").
	Label string
	// Chip is the hwmon directory's name file ("mlx5").
	Chip string
	// Input, Crit and Highest are in degrees Celsius. Crit is the
	// driver's critical threshold (mlx5: the firmware's warning-event
	// threshold, 105 °C on a ConnectX-5 ASIC, 10 °C below shutdown);
	// Highest the peak since the driver loaded or the history was reset.
	Input, Crit, Highest Opt[float64]
}

// Device is the sensors of one RDMA device.
type Device struct {
	Name    string
	Sensors []Sensor
}

// Snapshot is the temperature sensors of every kept RDMA device that has
// any. A device without hwmon (an older kernel, a VF, a software device)
// is not listed: that is a state, not an error.
type Snapshot struct {
	Devices []Device
	// Errors are the read and parse errors met; each names its file.
	Errors []error
}

// Options control Read.
type Options struct {
	// Keep selects RDMA devices by name (nil: all). An excluded device's
	// hwmon files are never read: on mlx5 each is a firmware command.
	Keep func(device string) bool
}

// Read reads the temperature sensors of the RDMA devices of sys (the
// host's /sys). It returns an error only when the class directory cannot
// be listed for another reason than its absence, or when ctx ends.
func Read(ctx context.Context, sys hostfs.FS, opts Options) (*Snapshot, error) {
	names, err := infiniband.DeviceNames(sys, opts.Keep)
	if err != nil {
		if errors.Is(err, infiniband.ErrNoClass) {
			return &Snapshot{}, nil
		}
		return nil, err
	}
	s := &Snapshot{}
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return s, err
		}
		d := sysattr.Dir{FS: sys}
		sensors := readDevice(&d, infiniband.ClassDir+"/"+name+"/device/hwmon")
		s.Errors = append(s.Errors, d.Errs...)
		if len(sensors) > 0 {
			s.Devices = append(s.Devices, Device{Name: name, Sensors: sensors})
		}
	}
	return s, nil
}

// readDevice reads every hwmon directory below one PCI function's hwmon/
// directory. A function without one (no device link: a software device;
// no hwmon/: a kernel or driver without it) has no sensors and no error.
func readDevice(d *sysattr.Dir, dir string) []Sensor {
	entries, err := d.FS.ReadDir(dir)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			d.Fail(err)
		}
		return nil
	}
	var out []Sensor
	seen := map[string]bool{}
	dirs := 0
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "hwmon") {
			continue
		}
		if dirs++; dirs > maxHwmonDirs {
			d.Fail(fmt.Errorf("/sys/%s: more than %d hwmon devices, rest skipped", dir, maxHwmonDirs))
			break
		}
		for _, sn := range readChip(d, dir+"/"+e.Name()) {
			if seen[sn.Label] {
				// Two chips (or a firmware naming two sensors alike)
				// must not make duplicate series.
				sn.Label += "/" + sn.channel
			}
			seen[sn.Label] = true
			out = append(out, sn.Sensor)
		}
	}
	return out
}

type chipSensor struct {
	Sensor
	channel string
}

// readChip reads one hwmon directory's temperature channels, in channel
// order.
func readChip(d *sysattr.Dir, dir string) []chipSensor {
	entries, err := d.FS.ReadDir(dir)
	if err != nil {
		d.Fail(err)
		return nil
	}
	saved := d.Path
	d.Path = dir
	defer func() { d.Path = saved }()
	chip, _ := d.Text("name", false)
	var channels []int
	for _, e := range entries {
		n, ok := inputChannel(e.Name())
		if ok {
			channels = append(channels, n)
		}
	}
	sort.Ints(channels)
	if len(channels) > maxSensors {
		d.Fail(fmt.Errorf("/sys/%s: %d temperature channels, only the first %d read", dir, len(channels), maxSensors))
		channels = channels[:maxSensors]
	}
	var out []chipSensor
	for _, n := range channels {
		ch := "temp" + strconv.Itoa(n)
		s := chipSensor{channel: ch, Sensor: Sensor{Chip: chip}}
		label, ok, err := readLabel(d, ch+"_label")
		switch {
		case err != nil:
			d.Fail(err)
			continue // a sensor without its name cannot be told apart
		case ok:
			s.Label = label
		default:
			s.Label = ch
		}
		s.Input = milli(d, ch+"_input", chip)
		s.Crit = milli(d, ch+"_crit", "")
		s.Highest = milli(d, ch+"_highest", "")
		if !s.Input.OK && !s.Crit.OK && !s.Highest.OK {
			continue
		}
		out = append(out, s)
	}
	return out
}

// inputChannel tells a temp<N>_input file and its channel.
func inputChannel(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, "temp")
	if !ok {
		return 0, false
	}
	num, ok := strings.CutSuffix(rest, "_input")
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(num)
	return n, err == nil && n > 0 && strconv.Itoa(n) == num
}

// readLabel reads a temp<N>_label: false without error when the driver has
// none; an error when its text cannot be a bounded label value.
func readLabel(d *sysattr.Dir, name string) (string, bool, error) {
	s, ok := d.Text(name, false)
	if !ok {
		return "", false, nil
	}
	if err := CheckLabel(s); err != nil {
		return "", false, &sysattr.ParseError{Path: "/sys/" + d.Path + "/" + name, Err: err}
	}
	return s, true, nil
}

// CheckLabel accepts a sensor label that may become a label value: a
// driver-chosen name as the label policy has it (names.Name: printable
// ASCII, at most names.MaxNameBytes), as drivers name sensors ("asic",
// "Module0", "Package id 0"; mlx5 copies at most 8 bytes of firmware
// name, sensor_name_hi/lo). What it refuses is counted there too.
func CheckLabel(s string) error {
	if !names.Name(s) {
		names.Limit(names.Refused, 1)
		return fmt.Errorf("sensor label %s: not 1 to %d characters of printable ASCII", sysattr.Quote(s), names.MaxNameBytes)
	}
	return nil
}

// milli reads a temperature file in millidegrees Celsius (the hwmon ABI:
// signed, "%ld"). ENODATA and EAGAIN are how hwmon drivers say a sensor
// has no value now: absent, no error. chip "mlx5" on an input: mlx5 reads
// a module sensor without a reading as 0, and the driver itself takes 0 for
// "no sensor" (mlx5_hwmon_is_module_mon_cap), so 0 is absent there too.
func milli(d *sysattr.Dir, name, chip string) Opt[float64] {
	b, err := d.FS.ReadFile(d.Path + "/" + name)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENODATA) && !errors.Is(err, syscall.EAGAIN) {
			d.Fail(err)
		}
		return Opt[float64]{}
	}
	v, err := ParseMillidegrees(string(b))
	if err != nil {
		d.Fail(&sysattr.ParseError{Path: "/sys/" + d.Path + "/" + name, Err: err})
		return Opt[float64]{}
	}
	if v == 0 && chip == driverMlx5 {
		return Opt[float64]{}
	}
	return sysattr.Some(v)
}

// ParseMillidegrees parses a hwmon temperature attribute ("68000\n") into
// degrees Celsius. Values beyond ±1000 °C are no temperature a NIC
// reports: a garbage file, not a reading.
func ParseMillidegrees(s string) (float64, error) {
	s = strings.TrimSpace(s)
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("not millidegrees: %s", sysattr.Quote(s))
	}
	if v < -1_000_000 || v > 1_000_000 {
		return 0, fmt.Errorf("millidegrees %d out of range", v)
	}
	return float64(v) / 1000, nil
}
