//go:build !unix

package gateway

import "time"

// processCPU is not measured here.
func processCPU() time.Duration { return 0 }
