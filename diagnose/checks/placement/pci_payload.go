// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"fmt"

	"github.com/rdma-doctor/rdma_doctor/diagnose"
	"github.com/rdma-doctor/rdma_doctor/diagnose/checks/kit"
	"github.com/rdma-doctor/rdma_doctor/internal/host/config"
	"github.com/rdma-doctor/rdma_doctor/internal/read/pci"
)

// The least MaxPayload and MaxReadReq NVIDIA's own collector accepts for
// every Mellanox card: linux-sysinfo-snapshot's "PCIE" performance check
// (sysinfo-snapshot.py, desired_payload_size 256, desired_max_read_request
// 512, Warning below either). mlnx_tune (mlnx-tools python/mlnx_tune)
// prints both values with no threshold, so it recommends nothing here.
const (
	minMaxPayload     = 256
	minMaxReadRequest = 512
)

// PCIPayloadChecks registers the checks of pci_payload.go; checks.All lists every concern's.
func PCIPayloadChecks(l *diagnose.CheckList) {
	l.Register(&diagnose.Check{
		ID:    "pci.payload",
		Title: "PCIe MaxPayload and MaxReadReq large enough",
		Reads: []diagnose.Source{diagnose.SourcePCI},
		Doc: "The HCA's PCIe Device Control register allows TLP payloads of at least 256 bytes (or all its Device Capabilities " +
			"support) and read requests of at least 512 bytes, the floor NVIDIA's sysinfo-snapshot warns below for every " +
			"Mellanox card (mlnx_tune prints both without a threshold); smaller ones split DMA into more transactions and cap " +
			"the bandwidth the port can reach. The registers are past the first 64 bytes of the config space, which sysfs gives " +
			"only to root (CAP_SYS_ADMIN): without it the check skips with \"needs root\".",
		Remedy: "MaxPayload is set by the BIOS (PCIe Max Payload Size) along the whole path; MaxReadReq at runtime with setpci as root " +
			"(lost at reboot); lspci -vvv shows DevCap and DevCtl.",
		Run: checkPCIPayload,
	})
}

func checkPCIPayload(s *diagnose.Reading, _ *diagnose.History, _ *config.Config) ([]diagnose.Finding, error) {
	devs := pciDevices(s)
	if len(devs) == 0 {
		return kit.NoTargets("no RDMA device sits on a PCI function (software devices only)"), nil
	}
	var out []diagnose.Finding
	for _, d := range devs {
		out = append(out, payloadFinding(d.Name, &d.PCI))
	}
	return out, nil
}

func payloadFinding(name string, f *pci.Function) diagnose.Finding {
	p := &f.Payload
	file := "/sys/bus/pci/devices/" + f.Address + "/" + pci.ConfigFile
	fd := diagnose.Finding{Target: name, Evidence: file + ": DevCap and DevCtl of the PCI Express capability"}
	switch {
	case !p.Read:
		fd.Severity, fd.Evidence = diagnose.Skip, "no "+file+" in this sysfs tree"
		if err := pciErr(f, pci.ConfigFile); err != nil {
			fd.Evidence = "cannot read " + file + ": " + err.Error()
		}
		return fd
	case p.NeedsRoot:
		fd.Severity = diagnose.Skip
		fd.Evidence = "needs root: " + file + " read only its first 64 bytes, which sysfs gives a reader without CAP_SYS_ADMIN; " +
			"DevCtl is past them. Run rdma_doctor as root or grant CAP_SYS_ADMIN"
		return fd
	case !p.MaxPayload.OK || !p.MaxReadRequest.OK:
		fd.Severity, fd.Evidence = diagnose.Skip, file+" has no PCI Express capability"
		if err := pciErr(f, pci.ConfigFile); err != nil {
			fd.Evidence += " (" + err.Error() + ")"
		}
		return fd
	}
	wantMPS := minMaxPayload
	if p.MaxPayloadSupported.OK && p.MaxPayloadSupported.V < wantMPS {
		wantMPS = p.MaxPayloadSupported.V // the device can do no more
	}
	fd.Observed = p.String()
	if p.MaxPayloadSupported.OK {
		fd.Observed += fmt.Sprintf(" (DevCap MaxPayload %d bytes)", p.MaxPayloadSupported.V)
	}
	fd.Expected = fmt.Sprintf("MaxPayload at least %d bytes, MaxReadReq at least %d bytes (NVIDIA sysinfo-snapshot's floor)", wantMPS, minMaxReadRequest)
	fd.Severity = diagnose.Pass
	var fixes []string
	if p.MaxPayload.V < wantMPS {
		// The kernel and BIOS size MPS for the whole path (an endpoint
		// above its bridge's MPS gets malformed TLPs): no setpci here.
		fixes = append(fixes, fmt.Sprintf("raise the PCIe Max Payload Size in the BIOS (every hop from the root port to %s must allow %d bytes: "+
			"lspci -vvv shows each bridge's DevCtl)", f.Address, wantMPS))
	}
	if p.MaxReadRequest.V < minMaxReadRequest {
		// DevCtl is at +0x8 of the PCI Express capability, MaxReadReq
		// bits 14:12 (5 = 4096 bytes): a masked write keeps the rest.
		fixes = append(fixes, fmt.Sprintf("as root, setpci -s %s CAP_EXP+0x8.w=5000:7000 sets MaxReadReq to 4096 bytes (lost at reboot; "+
			"check with lspci -s %s -vvv | grep MaxReadReq)", f.Address, f.Address))
	}
	if len(fixes) > 0 {
		fd.Severity = diagnose.Warn
		fd.Remedy = fixes[0]
		if len(fixes) > 1 {
			fd.Remedy += "; " + fixes[1]
		}
	}
	return fd
}
