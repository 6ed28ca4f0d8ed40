// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package collector

import (
	"strconv"

	"github.com/rdma-doctor/rdma_doctor/internal/read/netdev"
	"github.com/rdma-doctor/rdma_doctor/internal/read/sff"
	"github.com/rdma-doctor/rdma_doctor/internal/serve/expo"
)

// moduleDescs are the transceiver memory series of the netdev collector
// (--collector.netdev.module-eeprom).
type moduleDescs struct {
	readable, info, temperature, voltage   *expo.Desc
	rxPower, txBias, txPower               *expo.Desc
	temperatureThreshold, rxPowerThreshold *expo.Desc
}

func newModuleDescs() moduleDescs {
	return moduleDescs{
		readable:             desc("rdma_netdev_module_eeprom_readable", "1 when the transceiver memory of the RoCE netdev's port was read, 0 when not; reason says why not.", "netdev", "reason"),
		info:                 desc("rdma_netdev_module_info", "The transceiver of the RoCE netdev's port: identifier, memory map, vendor, part number and missing monitors; always 1.", "netdev", "identifier", "spec", "vendor", "part_number", "monitors_absent"),
		temperature:          desc("rdma_netdev_module_temperature_celsius", "Transceiver temperature from its memory (read on the slow interval); absent where the module does not monitor it.", "netdev"),
		voltage:              desc("rdma_netdev_module_voltage_volts", "Transceiver supply voltage from its memory; absent where the module does not monitor it.", "netdev"),
		rxPower:              desc("rdma_netdev_module_rx_power_watts", "Received optical power of a media lane (1-8) in watts, from the transceiver memory.", "netdev", "lane"),
		txBias:               desc("rdma_netdev_module_tx_bias_amperes", "Laser bias current of a media lane from the transceiver memory.", "netdev", "lane"),
		txPower:              desc("rdma_netdev_module_tx_power_watts", "Transmitted optical power of a media lane from the transceiver memory; absent where the module does not monitor it.", "netdev", "lane"),
		temperatureThreshold: desc("rdma_netdev_module_temperature_threshold_celsius", "The transceiver's own temperature alarm and warning limits in degrees Celsius.", "netdev", "threshold"),
		rxPowerThreshold:     desc("rdma_netdev_module_rx_power_threshold_watts", "The transceiver's own received power limits (threshold high_alarm, high_warning, low_warning, low_alarm).", "netdev", "threshold"),
	}
}

func (d *moduleDescs) module(out *sink, name string, me *netdev.ModuleEEPROM) {
	if me == nil {
		return
	}
	gauge(out, d.readable, b2f(me.Reason == ""), name, me.Reason)
	m := me.Module
	if m == nil {
		return
	}
	gauge(out, d.info, 1, name, m.Identifier.String(), string(m.Spec), m.Vendor, m.PartNumber, m.Absent)
	optFloat(out, d.temperature, m.Temperature, name)
	optFloat(out, d.voltage, m.Voltage, name)
	for i, l := range m.Lanes {
		lane := strconv.Itoa(i + 1)
		optFloat(out, d.rxPower, l.RxPower, name, lane)
		optFloat(out, d.txBias, l.TxBias, name, lane)
		optFloat(out, d.txPower, l.TxPower, name, lane)
	}
	if t := m.Thresholds; t != nil {
		thresholds(out, d.temperatureThreshold, t.Temperature, name)
		thresholds(out, d.rxPowerThreshold, t.RxPower, name)
	}
}

func optFloat(out *sink, d *expo.Desc, o netdev.Opt[float64], labels ...string) {
	if o.OK {
		gauge(out, d, o.V, labels...)
	}
}

func thresholds(out *sink, d *expo.Desc, o netdev.Opt[sff.Limits], name string) {
	if !o.OK {
		return
	}
	gauge(out, d, o.V.HighAlarm, name, "high_alarm")
	gauge(out, d, o.V.HighWarning, name, "high_warning")
	gauge(out, d, o.V.LowWarning, name, "low_warning")
	gauge(out, d, o.V.LowAlarm, name, "low_alarm")
}
