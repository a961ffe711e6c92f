package config

import (
	"math"
	"strconv"
	"strings"
)

// configScaled converts the JSON number s to an integer count of 10^-scale
// units, rounding half away from zero. exact is false when rounding dropped
// non-zero digits; inRange is false when the magnitude exceeds MaxInt64.
func configScaled(s string, scale int) (v int64, exact, inRange bool) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, expStr, hasExp := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return 0, true, true
	}
	exp := scale - len(frac)
	if hasExp {
		e, err := strconv.ParseInt(strings.TrimPrefix(expStr, "+"), 10, 32)
		if err != nil { // an exponent beyond ±2^31: far out of range either way
			if strings.HasPrefix(expStr, "-") {
				return 0, false, true
			}
			return 0, false, false
		}
		exp += int(e)
	}
	exact = true
	if exp < 0 {
		drop := -exp
		roundUp := false
		if drop >= len(digits) {
			roundUp = drop == len(digits) && digits[0] >= '5'
			exact = false
			digits = ""
		} else {
			dropped := digits[len(digits)-drop:]
			roundUp = dropped[0] >= '5'
			exact = strings.Trim(dropped, "0") == ""
			digits = digits[:len(digits)-drop]
		}
		exp = 0
		var u uint64
		if digits != "" {
			var err error
			if len(digits) > 19 {
				return 0, exact, false
			}
			if u, err = strconv.ParseUint(digits, 10, 64); err != nil {
				return 0, exact, false
			}
		}
		if roundUp {
			u++
		}
		if u > math.MaxInt64 {
			return 0, exact, false
		}
		v = int64(u)
	} else {
		if len(digits)+exp > 19 {
			return 0, true, false
		}
		u, err := strconv.ParseUint(digits+strings.Repeat("0", exp), 10, 64)
		if err != nil || u > math.MaxInt64 {
			return 0, true, false
		}
		v = int64(u)
	}
	if neg {
		v = -v
	}
	return v, exact, true
}
