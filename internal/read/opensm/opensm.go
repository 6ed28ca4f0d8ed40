// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package opensm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rdma-doctor/rdma_doctor/internal/read/hostfs"
)

// Process is a running opensm. Only the options rdma_doctor reports are
// kept; the command line itself is not (it may carry --smkey).
type Process struct {
	PID int
	// ConfigFile is -F/--config, "" when not given.
	ConfigFile string
	// GUID is -g/--guid: the port the SM binds to ("" = default port).
	GUID string
	// Priority is -p/--priority, -1 when not given.
	Priority int
	// LogFile is -f/--log_file.
	LogFile string
	// Malformed is true when an option it reads had a bad value.
	Malformed bool
}

// Options that take a value, by every spelling (opensm 3.3.23 --help).
// -q/--console and -Z/--part_enforce take an optional one and are treated
// as flags.
var (
	optConfig   = map[string]bool{"-F": true, "--config": true}
	optGUID     = map[string]bool{"-g": true, "--guid": true}
	optPriority = map[string]bool{"-p": true, "--priority": true}
	optLogFile  = map[string]bool{"-f": true, "--log_file": true}
	// Options with an argument that rdma_doctor does not read; listed so
	// their argument is not mistaken for an option. -k/--smkey and
	// --cc_key are secrets.
	optOther = map[string]bool{
		"-k": true, "--smkey": true, "--cc_key": true,
		"-c": true, "--create-config": true, "-l": true, "--lmc": true,
		"--subnet_prefix": true, "-R": true, "--routing_engine": true,
		"--lash_start_vl": true, "--sm_sl": true, "--nue_max_num_vls": true,
		"-M": true, "--lid_matrix_file": true, "-U": true, "--lfts_file": true,
		"-S": true, "--sadb_file": true, "-a": true, "--root_guid_file": true,
		"-u": true, "--cn_guid_file": true, "-G": true, "--io_guid_file": true,
		"--scatter-ports": true, "-H": true, "--max_reverse_hops": true,
		"-m": true, "--ids_guid_file": true, "-X": true, "--guid_routing_order_file": true,
		"--torus_config": true, "-s": true, "--sweep": true, "-t": true, "--timeout": true,
		"--retries": true, "-n": true, "--maxsmps": true, "-C": true, "--console-port": true,
		"-i": true, "--ignore_guids": true, "-w": true, "--hop_weights_file": true,
		"-O": true, "--port_search_ordering_file": true, "--dimn_ports_file": true,
		"--dump_files_dir": true, "-L": true, "--log_limit": true,
		"-P": true, "--Pconfig": true, "-Y": true, "--qos_policy_file": true,
		"--perfmgr_sweep_time_s": true, "--prefix_routes_file": true, "--log_prefix": true,
		"-D": true, "-d": true, "--debug": true,
	}
)

// ParseCmdline reads opensm's NUL-separated /proc/<pid>/cmdline. It keeps
// -F, -g, -p and -f, in the "-F file", "-Ffile", "--config file" and
// "--config=file" forms, and drops everything else unread.
func ParseCmdline(pid int, cmdline []byte) Process {
	p := Process{PID: pid, Priority: -1}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(args) > 0 {
		args = args[1:]
	}
	for i := 0; i < len(args); i++ {
		a := args[i]
		name, value, hasValue := a, "", false
		if strings.HasPrefix(a, "--") {
			if n, v, ok := strings.Cut(a, "="); ok {
				name, value, hasValue = n, v, true
			}
		} else if len(a) > 2 && a[0] == '-' {
			name, value, hasValue = a[:2], a[2:], true
		}
		takes := optConfig[name] || optGUID[name] || optPriority[name] || optLogFile[name] || optOther[name]
		if !takes {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				if !optOther[name] {
					p.Malformed = true
				}
				break
			}
			i++
			value = args[i]
		}
		switch {
		case optConfig[name]:
			p.ConfigFile = value
		case optLogFile[name]:
			p.LogFile = value
		case optGUID[name]:
			if g, err := strconv.ParseUint(strings.TrimPrefix(strings.ToLower(value), "0x"), 16, 64); err == nil {
				p.GUID = fmt.Sprintf("0x%016x", g)
			} else {
				p.Malformed = true
			}
		case optPriority[name]:
			if v, err := strconv.Atoi(value); err == nil && v >= 0 && v <= 15 {
				p.Priority = v
			} else {
				p.Malformed = true
			}
		}
	}
	return p
}

// FindProcesses lists the opensm processes below the procfs root: those
// whose comm is "opensm". Processes that vanish while being read are
// skipped; other read errors are returned with the processes found.
func FindProcesses(proc hostfs.FS) ([]Process, error) {
	entries, err := proc.ReadDir(".")
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil // no procfs below this root (a fixture with only sys/)
		}
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	var out []Process
	var errs []error
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		comm, err := proc.ReadFile(e.Name() + "/comm")
		if err != nil {
			if !gone(err) {
				errs = append(errs, err)
			}
			continue
		}
		if strings.TrimSpace(string(comm)) != "opensm" {
			continue
		}
		cmdline, err := proc.ReadFile(e.Name() + "/cmdline")
		if err != nil && !gone(err) {
			errs = append(errs, err)
		}
		out = append(out, ParseCmdline(pid, cmdline))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out, errors.Join(errs...)
}

// gone: the process exited between listing and reading (ENOENT, or ESRCH
// on some files).
func gone(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || strings.Contains(err.Error(), "no such process")
}

// ConfigCandidates are where distributions keep opensm.conf, in the order
// rdma_doctor looks: RHEL/Fedora ("rdma" subdirectory), then upstream,
// Debian and MLNX_OFED.
var ConfigCandidates = []string{"/etc/rdma/opensm.conf", "/etc/opensm/opensm.conf"}

// ShellCandidates are the init scripts' variable files: RHEL's
// /etc/sysconfig/opensm (GUIDS, PRIORITY) and Debian's /etc/default/opensm
// (PORTS).
var ShellCandidates = []string{"/etc/sysconfig/opensm", "/etc/default/opensm"}

// State is the local OpenSM as rdma_doctor sees it.
type State struct {
	Processes []Process
	// Config is opensm.conf: the file a running opensm names with -F, else
	// the override, else the first candidate that exists; nil if none.
	Config *Config
	// Shell are the sysconfig/default files that exist.
	Shell []*Config
	// Logs are the ends of the running opensm processes' logs (-f, else
	// log_file in opensm.conf, else DefaultLogFile), one per file.
	Logs []*Log
}

// Running reports whether an opensm process runs.
func (s *State) Running() bool { return len(s.Processes) > 0 }

// Read reads the local OpenSM state: processes from proc, files from root
// (both below --path.rootfs). configOverride, if set, is the opensm.conf
// path to read instead of the search. now places the log's year-less
// times (ParseLog).
//
// logs, if not nil, keeps where each log was read to (see LogReader); nil
// reads each log's tail afresh.
func Read(ctx context.Context, root, proc hostfs.FS, configOverride string, now time.Time, logs *LogReader) (*State, error) {
	st := &State{}
	var errs []error
	procs, err := FindProcesses(proc)
	st.Processes = procs
	if err != nil {
		errs = append(errs, err)
	}
	if ctx.Err() != nil {
		return st, ctx.Err()
	}

	candidates := ConfigCandidates
	explicit := false
	switch {
	case configOverride != "":
		candidates, explicit = []string{configOverride}, true
	default:
		for _, p := range procs {
			if p.ConfigFile != "" {
				candidates, explicit = []string{p.ConfigFile}, true
				break
			}
		}
	}
	for _, path := range candidates {
		b, err := readHostFile(root, path)
		if err != nil {
			if explicit || !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("opensm config: %w", err))
			}
			continue
		}
		st.Config = ParseConfig(path, b)
		break
	}
	for _, path := range ShellCandidates {
		b, err := readHostFile(root, path)
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("opensm defaults: %w", err))
			}
			continue
		}
		st.Shell = append(st.Shell, ParseShell(path, b))
	}
	if logs == nil {
		logs = &LogReader{}
	}
	parsed, err := readLogs(root, st, now, logs)
	st.Logs = parsed
	if err != nil {
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

// logFile is a process' log: -f, else log_file in opensm.conf, else
// DefaultLogFile.
func (s *State) logFile(p Process) string {
	if p.LogFile != "" {
		return p.LogFile
	}
	if s.Config != nil {
		if v, ok := s.Config.Get("log_file"); ok && v != "" {
			return v
		}
	}
	return DefaultLogFile
}

// LogOf is the end of a process' log, nil when it was not read.
func (s *State) LogOf(p Process) *Log {
	path := s.logFile(p)
	for _, l := range s.Logs {
		if l.Path == path {
			return l
		}
	}
	return nil
}

// LogFiles are the logs of the running processes, each once.
func (s *State) LogFiles() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range s.Processes {
		path := s.logFile(p)
		if !seen[path] {
			seen[path] = true
			out = append(out, path)
		}
	}
	return out
}

// readLogs reads every running process' log, from where r last stopped. A missing log is
// not an error: opensm may log to syslog only.
func readLogs(root hostfs.FS, st *State, now time.Time, r *LogReader) ([]*Log, error) {
	var logs []*Log
	var errs []error
	files := st.LogFiles()
	r.forget(files)
	for _, path := range files {
		rel, err := hostRel(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("opensm log: %w", err))
			continue
		}
		l, err := r.read(root, path, rel, now)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("opensm log: %w", err))
			continue
		}
		logs = append(logs, l)
	}
	return logs, errors.Join(errs...)
}

// readHostFile reads an absolute host path below the root FS.
func readHostFile(root hostfs.FS, path string) ([]byte, error) {
	rel, err := hostRel(path)
	if err != nil {
		return nil, err
	}
	return root.ReadFile(rel)
}

// hostRel is an absolute host path relative to the root FS.
func hostRel(path string) (string, error) {
	rel := strings.TrimLeft(path, "/")
	if rel == path || rel == "" || strings.Contains("/"+rel+"/", "/../") {
		return "", fmt.Errorf("%s: not a plain absolute path", path)
	}
	return rel, nil
}
