//go:build !linux

package main

import "log/slog"

// dropStartupPages does nothing outside Linux.
func dropStartupPages(*slog.Logger) int { return 0 }

// residentBytes is not known outside Linux.
func residentBytes() (total, file uint64) { return 0, 0 }
