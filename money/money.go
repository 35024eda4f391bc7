// Package money prints dollar amounts for people: the CLI, the status
// page, halt reasons and refusals all say an amount the same way. It only
// formats; it never rounds what is stored, charged or sent as JSON.
package money

import (
	"math"
	"strconv"
	"strings"
)

// USD writes a dollar amount so that the difference that matters shows
// and a non-zero amount never reads as zero:
//
//   - 0 is "$0".
//   - At or above $1 (after rounding): cents, dropped when whole —
//     "$1.50", "$1234.50", "$5".
//   - Below $1: two significant digits, with at least the cents —
//     "$0.50", "$0.012", "$0.0001", "$0.00012", "$0.00002". However small,
//     a non-zero amount keeps its first digits, so $0.00012 against a
//     ceiling of $0.0001 reads as over it.
//   - A negative amount is the same with a leading minus: "-$0.50".
//   - NaN and infinities print as Go does: "$NaN", "$+Inf".
//
// Status pages in JavaScript that print money mirror this rule.
func USD(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "$" + strconv.FormatFloat(v, 'f', -1, 64)
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	return sign + "$" + unsigned(v)
}

// unsigned writes v >= 0 by USD's rule, without the dollar sign.
func unsigned(v float64) string {
	if v == 0 {
		return "0"
	}
	// Two significant digits, rounded once: "1.2e-04".
	e := strconv.FormatFloat(v, 'e', 1, 64)
	exp, _ := strconv.Atoi(e[strings.IndexByte(e, 'e')+1:])
	if exp >= 0 {
		// $1 or more once rounded (0.996 rounds to 1.0e+00): cents.
		return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 2, 64), ".00")
	}
	rounded, _ := strconv.ParseFloat(e, 64)
	// 1.2e-04 needs 5 decimals for both digits; never fewer than the cents.
	s := strconv.FormatFloat(rounded, 'f', max(2, 1-exp), 64)
	// Drop a trailing zero of the significant digits (0.00010 → 0.0001),
	// but keep the cents (0.50).
	for strings.HasSuffix(s, "0") && len(s)-strings.IndexByte(s, '.')-1 > 2 {
		s = s[:len(s)-1]
	}
	return s
}
