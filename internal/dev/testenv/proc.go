// Copyright The rdma_doctor Authors
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"os"
	"strconv"
	"strings"
)

// Alive reports whether pid runs: it exists and is not a zombie (killed
// children are reparented, and in a container nobody may reap them).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
