// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package irq

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestClassify(t *testing.T) {
	const a = "0000:3b:00.0"
	for _, tc := range []struct {
		name    string
		kind    Kind
		channel int
		address string
	}{
		// mlx5, every era of research/sysfs.md §7
		{"mlx5_pages_eq@pci:8b76:00:02.0", Control, -1, "8b76:00:02.0"},
		{"mlx5_cmd_eq@pci:" + a, Control, -1, a},
		{"mlx5_async_eq@pci:" + a, Control, -1, a},
		{"mlx5_page_fault_eq@pci:" + a, Control, -1, a},
		{"mlx5_async@pci:" + a, Control, -1, a},
		{"mlx5_async0@pci:" + a, Control, -1, a},
		{"mlx5_async63@pci:" + a, Control, -1, a},
		{"mlx5_comp0@pci:" + a, Completion, 0, a},
		{"mlx5_comp1@pci:" + a, Completion, 1, a},
		{"mlx5_comp127@pci:" + a, Completion, 127, a},
		{"mlx5_combined0@pci:" + a, Completion, 0, a},
		{"mlx5_sf3@pci:" + a, SubFunction, -1, a},
		{"mlx5_sf_ctrl0@pci:" + a, SubFunction, -1, a},
		{"mlx5_comp@pci:" + a, Other, -1, a},
		{"mlx5_compx@pci:" + a, Other, -1, a},
		{"mlx5_new_thing@pci:" + a, Other, -1, a},
		{"mlx5_comp0@pci:10000:e0:00.0", Completion, 0, "10000:e0:00.0"}, // VMD domain
		{"mlx5_comp0", Completion, 0, ""},
		{"mlx5_comp0@pci:not-an-address", Other, -1, ""},
		// mlx4
		{"mlx4-comp-0@pci:0000:81:00.0", Completion, 0, "0000:81:00.0"},
		{"mlx4-comp-15@pci:0000:81:00.0", Completion, 15, "0000:81:00.0"},
		{"mlx4-async@pci:0000:81:00.0", Control, -1, "0000:81:00.0"},
		{"mlx4-3@0000:81:00.0", Completion, 3, "0000:81:00.0"},
		{"mlx4_core@pci:0000:81:00.0", Completion, -1, "0000:81:00.0"},
		{"mlx4-x@0000:81:00.0", Other, -1, "0000:81:00.0"},
		// hfi1 (drivers/infiniband/hw/hfi1/msix.c)
		{"hfi1_0", Control, -1, ""},
		{"hfi1_0 sdma3", Completion, 3, ""},
		{"hfi1_1 kctxt12", Completion, 12, ""},
		{"hfi1_0 nd kctxt2", Completion, 2, ""},
		{"hfi1_0 other", Other, -1, ""},
		{"hfi1_x sdma3", Other, -1, ""},
		// i40iw and irdma
		{"i40iw", Control, -1, ""},
		{"CEQ", Completion, -1, ""},
		{"AEQCEQ", Completion, 0, ""},
		{"irdma-0000:3b:00.0-AEQCEQ-0", Completion, 0, a},
		{"irdma-0000:3b:00.0-CEQ-7", Completion, 7, a},
		{"irdma-0000:3b:00.0-AEQ", Control, -1, a},
		{"irdma-ice-CEQ-2", Completion, 2, ""},
		{"irdma-0000:3b:00.0-XYZ", Other, -1, ""},
		// efa, bnxt_re, mana (names from their sources; mana's recorded in testdata/)
		{"efa-mgmnt@pci:0000:00:06.0", Control, -1, "0000:00:06.0"},
		{"efa-comp0@pci:0000:00:06.0", Completion, 0, "0000:00:06.0"},
		{"efa-comp31@pci:0000:00:06.0", Completion, 31, "0000:00:06.0"},
		{"efa-compx@pci:0000:00:06.0", Other, -1, "0000:00:06.0"},
		{"bnxt_re-nq-3@pci:" + a, Completion, 3, a},
		{"bnxt_qplib_nq-0", Completion, 0, ""},
		{"mana_hwc@pci:7870:00:00.0", Control, -1, "7870:00:00.0"},
		{"mana_q2@pci:7870:00:00.0", Completion, 2, "7870:00:00.0"},
		{"mana_intr", Other, -1, ""},
		// qib (drivers/infiniband/hw/qib/qib_iba7322.c)
		{"ib_qib", Completion, -1, ""},
		{"ib_qib0", Control, -1, ""},
		{"ib_qib0 (kctx)", Completion, -1, ""},
		{"ib_qib1 (sdma 1)", Completion, 1, ""},
		{"ib_qib0 (sdmaI 0)", Control, -1, ""},
		{"ib_qib0 (buf avail)", Control, -1, ""},
		{"ib_qib0 (sdma x)", Other, -1, ""},
		{"ib_qibx", Other, -1, ""},
		// not RDMA
		{"i40e-enp9s0f0-TxRx-0", Other, -1, ""},
		{"eth%d-ntfy-block.0", Other, -1, ""},
		{"gve-ntfy-blk0@pci:0000:00:08.0", Other, -1, "0000:00:08.0"},
		{"nvme0q1", Other, -1, ""},
		{"", Other, -1, ""},
		{"ehci_hcd:usb1, nouveau", Other, -1, ""},
	} {
		got := Classify(tc.name)
		if got.Kind != tc.kind || got.Channel != tc.channel || got.Address != tc.address {
			t.Errorf("Classify(%q) = %v/%d/%q, want %v/%d/%q", tc.name, got.Kind, got.Channel, got.Address, tc.kind, tc.channel, tc.address)
		}
	}
}

// TestClassifyRecordedNames: the tuna listing's comp vectors 10..31.
func TestClassifyRecordedNames(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "tuna-show-irqs-mlx5-crucible-issue522.txt"))
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) != 3 || !strings.HasPrefix(f[1], "mlx5_") {
			continue
		}
		v := Classify(f[1])
		if v.Kind != Completion || strconv.Itoa(v.Channel) != f[2] || v.Address != "0000:81:00.0" {
			t.Errorf("%s: %+v (affinity column %s)", f[1], v, f[2])
		}
		seen++
	}
	if seen != 14 {
		t.Errorf("%d names checked, want 14", seen)
	}
}

func TestChipAddress(t *testing.T) {
	for chip, want := range map[string]string{
		"IR-PCI-MSIX-0000:01:00.0":  "0000:01:00.0",
		"ITS-PCI-MSIX-0002:01:00.1": "0002:01:00.1",
		"ITS-PCI-MSI-0006:00:00.0":  "0006:00:00.0",
		"PCI-MSIX-0000:00:08.0":     "0000:00:08.0",
		"Hyper-V PCIe MSI":          "",
		"PCI-MSI-0000:01:00.0":      "0000:01:00.0",
		"PCI-MSI-edge":              "",
		"IR-PCI-MSI":                "",
		"IO-APIC":                   "",
		"IR-PCI-MSIX-0000:01:00":    "",
	} {
		if got := ChipAddress(chip); got != want {
			t.Errorf("ChipAddress(%q) = %q, want %q", chip, got, want)
		}
	}
}

func FuzzClassify(f *testing.F) {
	for _, s := range []string{"mlx5_comp0@pci:0000:01:00.0", "mlx4-comp-1@pci:0000:81:00.0", "hfi1_0 sdma3",
		"irdma-0000:3b:00.0-CEQ-7", "mlx5_async0@pci:8b76:00:02.0", "mlx4-3@0000:81:00.0",
		"efa-comp0@pci:0000:00:06.0", "bnxt_re-nq-3@pci:0000:3b:00.0", "mana_q0@pci:7870:00:00.0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		v := Classify(name)
		if v.Channel < -1 || v.Kind < Other || v.Kind > SubFunction {
			t.Fatalf("%q: %+v", name, v)
		}
		if v.Address != "" && !strings.Contains(name, v.Address) {
			t.Fatalf("%q: address %q not in the name", name, v.Address)
		}
		_ = v.Kind.String()
	})
}
