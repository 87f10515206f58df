package config

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Duration is a pool's time span as Karpenter's NodePool takes it, read from the stack file
// once: whole numbers of seconds, minutes and hours ("30s", "1m30s", "6h": the pattern
// Karpenter's CRD gives consolidateAfter and terminationGracePeriod), or "Never" where the
// field allows it (expireAfter). Text that is neither is kept only to be refused, with its
// field's name, by the pool's validation (GPUPool.problems); it is never used.
type Duration struct {
	d     time.Duration
	never bool
	// bad is the stack file's text when it is not a Karpenter duration.
	bad string
}

// karpenterDurationRE is Karpenter's pattern for a NodePool duration (its CRD's
// consolidateAfter, expireAfter and terminationGracePeriod, without "Never").
var karpenterDurationRE = regexp.MustCompile(`^([0-9]+(s|m|h))+$`)

// DurationOf is d as a pool's duration.
func DurationOf(d time.Duration) Duration { return Duration{d: d} }

// Never is the duration that never ends (expireAfter: nodes are not replaced for age).
func Never() Duration { return Duration{never: true} }

// Std is the span (zero for Never).
func (d Duration) Std() time.Duration { return d.d }

// IsNever reports whether the duration is Never.
func (d Duration) IsNever() bool { return d.never }

// String is the duration as the stack file writes it: whole hours, minutes and seconds, with
// no zero part ("24h", "1m30s"), or Never.
func (d Duration) String() string {
	switch {
	case d.bad != "":
		return d.bad
	case d.never:
		return "Never"
	case d.d == 0:
		return "0s"
	}
	var b strings.Builder
	left := d.d
	for _, unit := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}} {
		if n := left / unit.d; n > 0 {
			fmt.Fprintf(&b, "%d%s", n, unit.name)
			left -= n * unit.d
		}
	}
	return b.String()
}

// problem is what is wrong with the duration as read, "" if nothing; neverAllowed says whether
// the field takes Never.
func (d Duration) problem(neverAllowed bool) string {
	switch {
	case d.bad != "":
		return fmt.Sprintf("%q is not a Karpenter duration like 30s, 5m or 6h (whole numbers of s, m, h)", d.bad)
	case d.never && !neverAllowed:
		return `"Never" is allowed for expireAfter only; give a duration like 30s, 5m or 6h`
	}
	return ""
}

// UnmarshalJSON reads a duration as the stack file writes it; what is not one is kept for
// validation to refuse.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		*d = Duration{bad: string(b)}
		return nil
	}
	switch {
	case s == "Never":
		*d = Never()
	case karpenterDurationRE.MatchString(s):
		std, err := time.ParseDuration(s)
		if err != nil {
			*d = Duration{bad: s}
			return nil
		}
		*d = DurationOf(std)
	default:
		*d = Duration{bad: s}
	}
	return nil
}

// MarshalJSON writes the duration as the stack file does.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }
