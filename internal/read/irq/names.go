// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package irq

import (
	"strconv"
	"strings"

	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
)

// Kind is what an RDMA driver uses a vector for.
type Kind int

const (
	// Other is a name no RDMA driver naming rule matches (the netdev
	// queues of i40e, NVMe, ...), or an RDMA driver's name in a form
	// not known here.
	Other Kind = iota
	// Completion vectors carry the data path: mlx5_comp<N>,
	// mlx5_combined<N>, mlx4-comp-<N>, hfi1 sdma and receive contexts,
	// i40iw/irdma CEQs. These are the ones placement is about.
	Completion
	// Control vectors carry commands, page requests and async events:
	// mlx5_async*, the old mlx5_*_eq vectors, mlx4-async, hfi1's general
	// interrupt, the iWARP AEQ.
	Control
	// SubFunction vectors belong to the mlx5 sub-function IRQ pools
	// (mlx5_sf*), shared by the SFs of the PCI function.
	SubFunction
)

func (k Kind) String() string {
	switch k {
	case Completion:
		return "completion"
	case Control:
		return "control"
	case SubFunction:
		return "subfunction"
	}
	return "other"
}

// Vector is what an IRQ's action name says.
type Vector struct {
	Kind Kind
	// Channel is the number in the name (mlx5_comp7 is 7), -1 when there
	// is none. It is a label, not an index: mlx5 has numbered its comp
	// vectors from 0 and from 1 in different kernels (research/sysfs.md
	// §7), so nothing may assume it matches the MSI-X index.
	Channel int
	// Address is the PCI function named in the name ("@pci:<BDF>",
	// mlx4's "@<BDF>", irdma's "irdma-<BDF>-..."), empty when the name
	// carries none (hfi1, i40iw, old irdma).
	Address string
}

// Classify reads an action name. Every naming era of mlx5 is covered: the
// old EQ vectors (mlx5_pages_eq, mlx5_cmd_eq, mlx5_async_eq,
// mlx5_page_fault_eq), mlx5_async and mlx5_async<N>, mlx5_comp<N> from 0
// or 1, mlx5_combined<N>, the SF pools; mlx4's mlx4-comp-<N>@pci:,
// mlx4-<N>@ and mlx4-async@pci: and its INTx mlx4_core@pci:; hfi1's
// "hfi1_<unit>[ sdma<N>| kctxt<N>]"; i40iw's "i40iw" and "CEQ"; irdma's
// "irdma-<BDF>-{AEQCEQ,CEQ}-<N>", "irdma-<BDF>-AEQ" and the older bare
// "AEQCEQ"/"CEQ"; efa's "efa-comp<N>" and "efa-mgmnt"; bnxt_re's
// "bnxt_re-nq-<N>" and older "bnxt_qplib_nq-<N>"; mana's "mana_q<N>" and
// "mana_hwc"; qib's "ib_qib", "ib_qib<unit>[ (kctx)| (sdma <N>)| ...]".
func Classify(name string) Vector {
	v := Vector{Channel: -1}
	base := name
	if at := strings.LastIndexByte(name, '@'); at >= 0 {
		addr := strings.TrimPrefix(name[at+1:], "pci:")
		if pci.IsAddress(addr) {
			v.Address = addr
			base = name[:at]
		}
	}
	switch {
	case strings.HasPrefix(base, "mlx5_"):
		v.Kind, v.Channel = mlx5(base[len("mlx5_"):])
	case strings.HasPrefix(base, "mlx4"):
		v.Kind, v.Channel = mlx4(base)
	case strings.HasPrefix(base, "hfi1_"):
		v.Kind, v.Channel = hfi1(base[len("hfi1_"):])
	case base == "i40iw":
		v.Kind = Control
	case base == "CEQ":
		v.Kind = Completion
	case base == "AEQCEQ":
		v.Kind, v.Channel = Completion, 0 // CEQ 0 shares the AEQ vector
	case strings.HasPrefix(base, "irdma-"):
		v.Kind, v.Channel, v.Address = irdma(base[len("irdma-"):], v.Address)
	case strings.HasPrefix(base, "ib_qib"):
		v.Kind, v.Channel = qib(base[len("ib_qib"):])
	default:
		v.Kind, v.Channel = oneEQ(base)
	}
	return v
}

// oneEQ reads the names of drivers with one control vector and numbered
// completion vectors, from their sources: efa (drivers/infiniband/hw/efa/
// efa_main.c: "efa-mgmnt@pci:%s", "efa-comp%d@pci:%s"), bnxt_re
// (drivers/infiniband/hw/bnxt_re/qplib_fp.c: "bnxt_re-nq-%d@pci:%s", before
// 5.x "bnxt_qplib_nq-%d"; the notification queues are its completion
// vectors) and mana, whose event queues serve both the netdev and mana_ib
// (drivers/net/ethernet/microsoft/mana/gdma_main.c: "mana_hwc@pci:%s",
// "mana_q%d@pci:%s"; recorded in testdata/).
func oneEQ(base string) (Kind, int) {
	switch base {
	case "efa-mgmnt", "mana_hwc":
		return Control, -1
	}
	for _, p := range []string{"efa-comp", "bnxt_re-nq-", "bnxt_qplib_nq-", "mana_q"} {
		if n, ok := strings.CutPrefix(base, p); ok && number(n) >= 0 {
			return Completion, number(n)
		}
	}
	return Other, -1
}

// number parses a non-negative decimal suffix; -1 when s is not one.
func number(s string) int {
	if s == "" || len(s) > 6 || !allDigits(s) {
		return -1
	}
	n, _ := strconv.Atoi(s)
	return n
}

func mlx5(rest string) (Kind, int) {
	switch rest {
	case "async", "async_eq", "cmd_eq", "pages_eq", "page_fault_eq":
		return Control, -1
	}
	if n, ok := strings.CutPrefix(rest, "comp"); ok && number(n) >= 0 {
		return Completion, number(n)
	}
	if n, ok := strings.CutPrefix(rest, "combined"); ok && number(n) >= 0 {
		return Completion, number(n)
	}
	if n, ok := strings.CutPrefix(rest, "async"); ok && number(n) >= 0 {
		return Control, -1
	}
	if strings.HasPrefix(rest, "sf") {
		return SubFunction, -1
	}
	return Other, -1
}

func mlx4(base string) (Kind, int) {
	switch {
	case base == "mlx4-async":
		return Control, -1
	case base == "mlx4_core": // INTx: the one vector does everything
		return Completion, -1
	}
	if n, ok := strings.CutPrefix(base, "mlx4-comp-"); ok && number(n) >= 0 {
		return Completion, number(n)
	}
	if n, ok := strings.CutPrefix(base, "mlx4-"); ok && number(n) >= 0 {
		return Completion, number(n)
	}
	return Other, -1
}

// hfi1 names its vectors DRIVER_NAME "_%d" (general), "_%d sdma%d" and
// "_%d kctxt%d" (drivers/infiniband/hw/hfi1/msix.c).
func hfi1(rest string) (Kind, int) {
	unit, what, hasWhat := strings.Cut(rest, " ")
	if number(unit) < 0 {
		return Other, -1
	}
	if !hasWhat {
		return Control, -1
	}
	what = strings.TrimPrefix(what, "nd ") // netdev receive contexts
	for _, p := range []string{"sdma", "kctxt"} {
		if n, ok := strings.CutPrefix(what, p); ok && number(n) >= 0 {
			return Completion, number(n)
		}
	}
	return Other, -1
}

// qib names its MSI-X vectors QIB_DRV_NAME "%d%s" with a suffix from its
// irq_table ("", " (buf avail)", " (sdma N)", " (sdmaI N)", " (sdmaP N)",
// " (sdmaC N)") and its receive contexts QIB_DRV_NAME "%d (kctx)"; with INTx
// or MSI the one vector is plain QIB_DRV_NAME, "ib_qib", and does everything
// (drivers/infiniband/hw/qib/qib_iba7322.c, qib_iba7220.c). The receive
// contexts and the SDMA engines carry the data path, as hfi1's do.
func qib(rest string) (Kind, int) {
	if rest == "" {
		return Completion, -1
	}
	unit, what, hasWhat := strings.Cut(rest, " ")
	switch {
	case number(unit) < 0:
		return Other, -1
	case !hasWhat:
		return Control, -1
	case what == "(kctx)":
		return Completion, -1
	}
	if n, ok := strings.CutPrefix(what, "(sdma "); ok {
		if ch := number(strings.TrimSuffix(n, ")")); ch >= 0 && strings.HasSuffix(n, ")") {
			return Completion, ch
		}
	}
	for _, p := range []string{"(buf avail)", "(sdmaI ", "(sdmaP ", "(sdmaC "} {
		if strings.HasPrefix(what, p) {
			return Control, -1
		}
	}
	return Other, -1
}

// irdma names its vectors "irdma-<dev>-AEQCEQ-0", "irdma-<dev>-CEQ-<N>" and
// "irdma-<dev>-AEQ", where <dev> is the PCI address (in one release the
// driver name).
func irdma(rest, addr string) (Kind, int, string) {
	cut := func(sep string) (string, int, bool) {
		i := strings.LastIndex(rest, sep)
		if i < 0 {
			return "", -1, false
		}
		n := number(rest[i+len(sep):])
		return rest[:i], n, n >= 0
	}
	kind, dev, ch := Other, "", -1
	if d, n, ok := cut("-AEQCEQ-"); ok {
		kind, dev, ch = Completion, d, n
	} else if d, n, ok := cut("-CEQ-"); ok {
		kind, dev, ch = Completion, d, n
	} else if d, ok := strings.CutSuffix(rest, "-AEQ"); ok {
		kind, dev = Control, d
	}
	if addr == "" && pci.IsAddress(dev) {
		addr = dev
	}
	return kind, ch, addr
}

// ChipAddress returns the PCI function named by a per-device MSI domain
// chip column ("IR-PCI-MSIX-0000:01:00.0", "ITS-PCI-MSIX-0000:01:00.0",
// "PCI-MSI-0000:01:00.0"; Linux 6.2 and later), or "".
func ChipAddress(chip string) string {
	for _, p := range []string{"PCI-MSIX-", "PCI-MSI-"} {
		if i := strings.Index(chip, p); i >= 0 {
			if a := chip[i+len(p):]; pci.IsAddress(a) {
				return a
			}
		}
	}
	return ""
}
