// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package fabric

import (
	"context"
	"fmt"
	"io"

	"github.com/rdma-doctor/rdma_doctor/internal/read/sm"
	"github.com/rdma-doctor/rdma_doctor/internal/read/subprocess"
)

// The fabric cache holds each node's LIDs as the discovery found them,
// and ibqueryerrors sends its PMA queries to those LIDs and prints the
// answers under the GUID the cache names (ibqueryerrors.c print_node:
// node->guid, node->smalid): nothing in its output tells that another
// node answered. When the subnet manager hands out other LIDs (opensm
// restarted with another LMC or another guid2lid, a new master taking
// over), a sweep against the old cache publishes one node's counters
// under another's GUID. LIDs are the master SM's to give, so the sweep
// trusts the cache's LIDs only while the master SM is the one that was
// master when the cache was discovered: sminfo before and after the two
// runs (one process and two MADs each, whatever the fabric's size).
//
// The master is the same when its GUID and LID are, it is still MASTER,
// and its activity count did not go back: opensm's ActCount is the number
// of SMPs it has sent (osm_sminfo_rcv.c: qp0_mads_sent), so a restarted
// opensm starts again below what the one before it had reached. An SM
// that changes LIDs while it keeps running (a LID conflict it resolves)
// is not seen here: the next topology scan's LIDs change the fingerprint
// and the cache is discovered again (docs/subnet-manager.md).

// querySM runs sminfo on the sweep's local port and returns the master
// SM it names, or the reason and message of a failure.
func (s *Sweeper) querySM(ctx context.Context) (sm.Info, Reason, string) {
	var info sm.Info
	res, err := subprocess.Run(ctx, subprocess.Spec{
		Path: s.cfg.SMInfo, Args: append([]string{}, s.cfg.Local...), Timeout: s.timeout(),
		MaxOutput: 64 << 10, MaxStderr: 64 << 10, Reaper: s.cfg.Reaper,
		Stdout: func(r io.Reader) error {
			b, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			info, err = sm.ParseSMInfo(b)
			return err
		},
	})
	if err != nil {
		msg := "sminfo: " + err.Error()
		if line := ErrorLine(res.Stderr); line != "" {
			msg += ": " + line
		}
		return info, Classify(err), msg
	}
	if info.State != sm.StateMaster {
		return info, ReasonSMChanged, fmt.Sprintf("sminfo: the SM at LID %d is %s, not master: its LIDs may still change", info.LID, info.State)
	}
	return info, "", ""
}

// smChanged reports whether now is another master SM than was, or the
// same one restarted.
func smChanged(was, now sm.Info) bool {
	return was.GUID != now.GUID || was.LID != now.LID || now.ActivityCount < was.ActivityCount
}

// smBefore reads the master SM before a sweep's runs. When it is not the
// one the last sweep saw, the cache is discovered again now: its LIDs
// may name other nodes. A failure leaves the sweep unverified.
func (s *Sweeper) smBefore(ctx context.Context) (sm.Info, Reason, string) {
	info, r, msg := s.querySM(ctx)
	if r != "" {
		s.cacheFor = 0
		return info, r, msg
	}
	if s.smSeen != nil && smChanged(*s.smSeen, info) && s.cache != nil {
		s.cfg.Logger.Info("counter sweep: the subnet manager changed; the fabric cache is discovered again",
			"was", smString(*s.smSeen), "now", smString(info))
		s.cacheFor = 0
	}
	s.smSeen = &info
	return info, "", ""
}

// smAfter reads the master SM after a sweep's runs: when it is not
// before's, or cannot be read, the LIDs the runs queried are not
// verified, and the cache is discovered again next sweep.
func (s *Sweeper) smAfter(ctx context.Context, before sm.Info) (Reason, string) {
	info, r, msg := s.querySM(ctx)
	if r == "" && smChanged(before, info) {
		r, msg = ReasonSMChanged, fmt.Sprintf("the subnet manager changed during the sweep (%s, then %s): its LIDs may name other nodes", smString(before), smString(info))
	}
	if r != "" {
		s.cacheFor = 0
		return r, msg
	}
	s.smSeen = &info
	return "", ""
}

func smString(i sm.Info) string {
	return fmt.Sprintf("SM %s LID %d activity count %d", i.GUID, i.LID, i.ActivityCount)
}
