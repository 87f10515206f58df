package config

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	// The time zones a schedule names are checked the same way on every machine that
	// deploys, whether or not it has the system's zoneinfo.
	_ "time/tzdata"

	"github.com/distribution/reference"
)

// WarmSchedule is a pool's warm capacity (the pool's `warm` field): in each window, Nodes GPU
// nodes of the pool are kept up, with the pool's images already on them, for a job to start
// on at once. Outside the windows the pool has no node until a job asks for one.
type WarmSchedule struct {
	// TimeZone is the IANA zone the windows are in ("Europe/Berlin"); "UTC" by default.
	TimeZone string `json:"timeZone,omitempty"`
	// Windows are the times of the week to keep nodes warm.
	Windows []WarmWindowSpec `json:"windows"`
	// Images a container-form pool's jobs run (`container:`), pulled onto each warm node
	// beside the runner image. Each needs a shell (sh), as CUDA images have.
	Images []string `json:"images,omitempty"`
	// Lead is how long before each window's `from` its placeholders start, so that its nodes
	// are up, their images pulled, at `from`; whole minutes (a CronJob's resolution). By
	// default the slow end of the form's modelled cold start, to the minute
	// (WarmLeadRunnerForm, WarmLeadContainerForm); "0s" opens the window cold at `from`.
	Lead *Duration `json:"lead,omitempty"`
}

// Default leads: the slow end of gpuci cost's cold-start model from Karpenter's decision to
// the node's last pull, rounded up to the minute, for the dev pools (through the image
// cache, onto the NVMe: 173 s for a runner-form node, 467 s for a container-form node with the
// 8 GB CUDA image). cmd/gpuci/internal/cost's tests hold each above its model.
const (
	WarmLeadRunnerForm    = 4 * time.Minute
	WarmLeadContainerForm = 8 * time.Minute
	// warmLeadMax bounds a lead: longer is a window of its own.
	warmLeadMax = time.Hour
	// WarmImagesMax bounds warm.images: each image's pull has a rule of its own in the
	// window's Job's pod failure policy (k8s.WarmPullFailureRules), which Kubernetes caps at
	// 20 rules (k8s.io/kubernetes pkg/apis/batch/validation maxPodFailurePolicyRules), one of
	// them the disruptions'.
	WarmImagesMax = 19
)

// WarmWindowSpec is a window as the stack file gives it.
type WarmWindowSpec struct {
	// Days are "mon-fri", "sat,sun", "daily", or day names (mon … sun) and ranges joined by ",".
	Days string `json:"days"`
	// From and To are the window's start and end, "HH:MM" in the schedule's zone, From < To
	// (a window does not cross midnight; "24:00" ends at midnight).
	From string `json:"from"`
	To   string `json:"to"`
	// Nodes is how many GPU nodes the window keeps warm (each holds one job's GPU share): at
	// most the pool's gpuLimit.
	Nodes int `json:"nodes"`
}

// WarmWindow is a validated window.
type WarmWindow struct {
	// Days are the weekdays it opens on, in order.
	Days []time.Weekday
	// From and To are its start and end since midnight, in its zone.
	From, To time.Duration
	Nodes    int
}

// Length is how long the window stays open.
func (w WarmWindow) Length() time.Duration { return w.To - w.From }

// Schedule is when the window's placeholders start, lead before its opening, as a cron
// schedule (minute hour * * weekdays) in the schedule's zone: a lead past midnight starts
// the evening before.
func (w WarmWindow) Schedule(lead time.Duration) string {
	start, shift := w.From-lead, 0
	if start < 0 {
		start, shift = start+24*time.Hour, -1
	}
	days := make([]int, len(w.Days))
	for i, d := range w.Days {
		days[i] = (int(d) + shift + 7) % 7
	}
	slices.Sort(days)
	names := make([]string, len(days))
	for i, d := range days {
		names[i] = strconv.Itoa(d)
	}
	return fmt.Sprintf("%d %d * * %s", int(start.Minutes())%60, int(start.Hours()), strings.Join(names, ","))
}

// HoursPerWeek is the window's hours in a week, its lead included (its nodes run then).
func (w WarmWindow) HoursPerWeek(lead time.Duration) float64 {
	return (w.Length() + lead).Hours() * float64(len(w.Days))
}

// Warm is a pool's validated warm schedule.
type Warm struct {
	// TimeZone is the zone's IANA name, as the CronJobs carry it.
	TimeZone string
	Windows  []WarmWindow
	Images   []string
	// Lead is how long before each window's opening its placeholders start.
	Lead time.Duration
}

// NodeHoursPerWeek is how many node-hours the windows keep warm in a week.
func (w *Warm) NodeHoursPerWeek() float64 {
	if w == nil {
		return 0
	}
	total := 0.0
	for _, win := range w.Windows {
		total += win.HoursPerWeek(w.Lead) * float64(win.Nodes)
	}
	return total
}

// WarmConsolidateAfterFloor is the least consolidateAfter of a pool with warm windows: well
// past the preemption gap (make e2e binds a job's pod on a warm node about 2 s after its
// creation, the placeholder's exit included).
const WarmConsolidateAfterFloor = 5 * time.Second

var (
	weekdays  = []string{"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
	clockRE   = regexp.MustCompile(`^([01][0-9]|2[0-4]):([0-5][0-9])$`)
	warmAtMin = time.Minute // a CronJob's resolution
)

// parse validates the schedule of a pool whose gpuLimit and job form are given; bad records
// each problem as a field of the pool.
func (s WarmSchedule) parse(gpuLimit int, jobForm JobForm, bad func(field, problem string)) *Warm {
	w := &Warm{TimeZone: s.TimeZone, Images: s.Images, Lead: WarmLeadRunnerForm}
	if jobForm == JobFormContainer {
		w.Lead = WarmLeadContainerForm
	}
	if s.Lead != nil {
		switch lead := s.Lead.Std(); {
		case s.Lead.problem(false) != "":
			bad("warm.lead", s.Lead.problem(false))
		case lead%time.Minute != 0 || lead > warmLeadMax:
			bad("warm.lead", fmt.Sprintf("%s is not whole minutes up to %s (a CronJob starts on the minute); the default is the form's modelled cold start, %s for the runner form, %s for the container form", s.Lead, DurationOf(warmLeadMax), DurationOf(WarmLeadRunnerForm), DurationOf(WarmLeadContainerForm)))
		default:
			w.Lead = lead
		}
	}
	if w.TimeZone == "" {
		w.TimeZone = "UTC"
	}
	if w.TimeZone == "Local" {
		bad("warm.timeZone", `"Local" is this machine's zone, not the cluster's: name an IANA zone, e.g. Europe/Berlin`)
	} else if _, err := time.LoadLocation(w.TimeZone); err != nil {
		bad("warm.timeZone", fmt.Sprintf("%q is not an IANA time zone (e.g. Europe/Berlin, America/New_York, UTC)", w.TimeZone))
	}
	if len(s.Windows) == 0 {
		bad("warm.windows", `is empty: give at least one, e.g. {"days": "mon-fri", "from": "08:00", "to": "19:00", "nodes": 1}`)
	}
	for i, spec := range s.Windows {
		at := fmt.Sprintf("warm.windows[%d]", i)
		win := WarmWindow{Nodes: spec.Nodes}
		var err error
		if win.Days, err = parseDays(spec.Days); err != nil {
			bad(at+".days", err.Error())
		}
		from, errFrom := parseClock(spec.From)
		to, errTo := parseClock(spec.To)
		switch {
		case errFrom != nil:
			bad(at+".from", errFrom.Error())
		case errTo != nil:
			bad(at+".to", errTo.Error())
		case to <= from:
			bad(at+".to", fmt.Sprintf("%s is not after from (%s): a window does not cross midnight; split it in two", spec.To, spec.From))
		case from >= 24*time.Hour:
			bad(at+".from", "24:00 only ends a window")
		}
		win.From, win.To = from, to
		if spec.Nodes < 1 || spec.Nodes > gpuLimit {
			bad(at+".nodes", fmt.Sprintf("must be 1–gpuLimit (%d): each warm node holds one GPU of the pool's limit, got %d", gpuLimit, spec.Nodes))
		}
		for j, other := range w.Windows {
			if overlap(win, other) {
				bad(at, fmt.Sprintf("overlaps warm.windows[%d] on a day they share: their nodes would add up; merge them", j))
			}
		}
		w.Windows = append(w.Windows, win)
	}
	if len(s.Images) > 0 && jobForm != JobFormContainer {
		bad("warm.images", "only a container-form pool's jobs run images of their own; a runner-form pool's warm nodes hold its runner image")
	}
	if len(s.Images) > WarmImagesMax {
		bad("warm.images", fmt.Sprintf("lists %d images, more than %d: keep the images most of the pool's jobs run", len(s.Images), WarmImagesMax))
	}
	for _, img := range s.Images {
		if _, err := reference.ParseNormalizedNamed(img); err != nil {
			bad("warm.images", fmt.Sprintf("%q is not an image reference: %v", img, err))
		}
	}
	return w
}

// parseDays reads "mon-fri", "sat,sun", "daily" or a list of names and ranges.
func parseDays(s string) ([]time.Weekday, error) {
	s = strings.ToLower(strings.TrimSpace(s))
	if s == "daily" {
		s = "sun-sat"
	}
	index := func(name string) (int, error) {
		if i := slices.Index(weekdays, strings.TrimSpace(name)); i >= 0 {
			return i, nil
		}
		return 0, fmt.Errorf("%q is not a day (sun, mon, tue, wed, thu, fri, sat)", name)
	}
	seen := map[time.Weekday]bool{}
	for _, part := range strings.Split(s, ",") {
		first, last, isRange := strings.Cut(part, "-")
		a, err := index(first)
		if err != nil {
			return nil, err
		}
		b := a
		if isRange {
			if b, err = index(last); err != nil {
				return nil, err
			}
			if b < a {
				return nil, fmt.Errorf("%q runs backwards; the week starts on sun (write sat,sun or fri-sat,sun)", part)
			}
		}
		for d := a; d <= b; d++ {
			seen[time.Weekday(d)] = true
		}
	}
	var days []time.Weekday
	for d := time.Sunday; d <= time.Saturday; d++ {
		if seen[d] {
			days = append(days, d)
		}
	}
	return days, nil
}

// parseClock reads "HH:MM" (00:00–24:00) as the time since midnight.
func parseClock(s string) (time.Duration, error) {
	m := clockRE.FindStringSubmatch(s)
	if m == nil {
		return 0, fmt.Errorf("%q is not a time of day like 08:00", s)
	}
	h, _ := strconv.Atoi(m[1])
	mm, _ := strconv.Atoi(m[2])
	d := time.Duration(h)*time.Hour + time.Duration(mm)*warmAtMin
	if d > 24*time.Hour {
		return 0, fmt.Errorf("%q is past midnight", s)
	}
	return d, nil
}

// overlap: the two windows are open at once on some day.
func overlap(a, b WarmWindow) bool {
	shared := slices.ContainsFunc(a.Days, func(d time.Weekday) bool { return slices.Contains(b.Days, d) })
	return shared && a.From < b.To && b.From < a.To
}
