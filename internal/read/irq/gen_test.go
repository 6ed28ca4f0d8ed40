// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package irq

import (
	"fmt"
	"strings"
)

// generateInterrupts writes a /proc/interrupts in the 6.2+ x86 format with
// ncpu CPU columns and nirq numbered IRQs: a few legacy IO-APIC lines, then
// mlx5 functions of 1 async and 63 comp vectors each (the per-device MSI
// domain chip column), then the architecture summary lines. Counts vary so
// that widths vary as on a real host.
func generateInterrupts(ncpu, nirq int) []byte {
	var b strings.Builder
	b.Grow((nirq + 20) * (ncpu*11 + 64))
	b.WriteString("     ")
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, "      CPU%-4d", c)
	}
	b.WriteByte('\n')
	row := func(label string, seed int) {
		fmt.Fprintf(&b, "%4s:", label)
		for c := 0; c < ncpu; c++ {
			v := (seed*7919 + c*104729) % 1000003
			if (seed+c)%5 != 0 {
				v = 0
			}
			fmt.Fprintf(&b, " %10d", v)
		}
	}
	for i := 0; i < nirq; i++ {
		irq := 24 + i
		row(fmt.Sprint(irq), i)
		if i < 8 {
			fmt.Fprintf(&b, "  IR-IO-APIC   %2d-edge      legacy%d\n", i, i)
			continue
		}
		fn, vec := (i-8)/64, (i-8)%64
		bdf := fmt.Sprintf("0000:%02x:00.%d", 0x1a+fn/2, fn%2)
		name := fmt.Sprintf("mlx5_comp%d", vec-1)
		if vec == 0 {
			name = "mlx5_async0"
		}
		fmt.Fprintf(&b, "  IR-PCI-MSIX-%s %3d-edge      %s@pci:%s\n", bdf, vec, name, bdf)
	}
	for _, l := range []string{"NMI", "LOC", "SPU", "PMI", "IWI", "RTR", "RES", "CAL", "TLB"} {
		row(l, len(l))
		b.WriteString("   Some architecture interrupts\n")
	}
	b.WriteString(" ERR:          0\n MIS:          0\n")
	return []byte(b.String())
}
