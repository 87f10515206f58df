package config_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/luxfi/lux-gpu-ci/config"
	"github.com/luxfi/lux-gpu-ci/internal/testsupport/testkit"
)

// withWarm is the test dev stack with its first pool given a warm schedule (and fields).
func withWarm(t *testing.T, warm map[string]any, fields map[string]any) (*config.Config, error) {
	t.Helper()
	pool := map[string]any{"name": "gpu-spot", "instanceTypes": []string{"g4dn.xlarge"}, "gpuLimit": 2, "maxRunners": 1, "onDemandRetry": true, "warm": warm}
	for k, v := range fields {
		pool[k] = v
	}
	b, err := json.Marshal([]any{pool})
	require.NoError(t, err)
	cfg := testkit.With(testkit.StackConfig(t, "dev"), "gpuPools", string(b))
	return config.Parse("dev", func(k string) (string, bool) { v, ok := cfg[k]; return v, ok }, nil)
}

func TestWarmScheduleIsTypedAtTheBoundary(t *testing.T) {
	c, err := withWarm(t, map[string]any{
		"timeZone": "Europe/Berlin",
		"windows": []any{
			map[string]any{"days": "mon-fri", "from": "08:00", "to": "19:30", "nodes": 2},
			map[string]any{"days": "sat,sun", "from": "10:00", "to": "24:00", "nodes": 1},
		},
	}, nil)
	require.NoError(t, err)
	require.Len(t, c.Pools(), 2, "the pool and its twin")
	w := c.GPUPools[0].Warm
	require.NotNil(t, w)
	assert.Equal(t, "Europe/Berlin", w.TimeZone)
	require.Len(t, w.Windows, 2)
	week := w.Windows[0]
	assert.Equal(t, []time.Weekday{time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday}, week.Days)
	assert.Equal(t, 8*time.Hour, week.From)
	assert.Equal(t, 11*time.Hour+30*time.Minute, week.Length())
	assert.Equal(t, config.WarmLeadRunnerForm, w.Lead, "a runner-form pool's default lead")
	assert.Equal(t, "0 8 * * 1,2,3,4,5", week.Schedule(0), "cron's minute, hour, and weekdays with Sunday 0")
	assert.Equal(t, "56 7 * * 1,2,3,4,5", week.Schedule(w.Lead), "the lead before from")
	assert.Equal(t, "56 9 * * 0,6", w.Windows[1].Schedule(w.Lead))
	assert.Equal(t, 14*time.Hour, w.Windows[1].Length(), "to 24:00 is to midnight")
	assert.InDelta(t, 5*(11.5+4.0/60)*2+2*(14+4.0/60)*1, w.NodeHoursPerWeek(), 1e-9, "node-hours a week, the lead's included, which gpuci cost prices")
	assert.Nil(t, c.Pools()[1].Warm, "a retry twin keeps nothing warm")

	c, err = withWarm(t, map[string]any{"windows": []any{map[string]any{"days": "daily", "from": "00:00", "to": "06:15", "nodes": 1}}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "UTC", c.GPUPools[0].Warm.TimeZone, "UTC unless said")
	assert.Equal(t, "0 0 * * 0,1,2,3,4,5,6", c.GPUPools[0].Warm.Windows[0].Schedule(0))
	assert.Equal(t, "56 23 * * 0,1,2,3,4,5,6", c.GPUPools[0].Warm.Windows[0].Schedule(4*time.Minute), "a lead past midnight starts the evening before")
	c, err = withWarm(t, map[string]any{"windows": []any{map[string]any{"days": "mon", "from": "07:45", "to": "08:00", "nodes": 1}}}, nil)
	require.NoError(t, err)
	assert.Equal(t, "45 7 * * 1", c.GPUPools[0].Warm.Windows[0].Schedule(0))
	c, err = withWarm(t, map[string]any{"windows": []any{map[string]any{"days": "mon,sat", "from": "00:05", "to": "08:00", "nodes": 1}}, "lead": "10m"}, nil)
	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, c.GPUPools[0].Warm.Lead)
	assert.Equal(t, "55 23 * * 0,5", c.GPUPools[0].Warm.Windows[0].Schedule(c.GPUPools[0].Warm.Lead), "Sunday and Friday evenings")
	c, err = withWarm(t, map[string]any{"windows": []any{map[string]any{"days": "mon", "from": "07:45", "to": "08:00", "nodes": 1}}, "lead": "0s"}, nil)
	require.NoError(t, err)
	assert.Zero(t, c.GPUPools[0].Warm.Lead, "0s opens the window cold at from")
	c, err = withWarm(t, map[string]any{"windows": []any{map[string]any{"days": "mon", "from": "07:45", "to": "08:00", "nodes": 1}}}, map[string]any{"jobForm": "container", "runnerGroup": "g", "trustedRepositoriesOnly": true})
	require.NoError(t, err)
	assert.Equal(t, config.WarmLeadContainerForm, c.GPUPools[0].Warm.Lead, "a container-form pool's default lead: its job image's pull")
}

func TestBadWarmSchedulesAreRefused(t *testing.T) {
	window := func(days, from, to string, nodes int) map[string]any {
		return map[string]any{"days": days, "from": from, "to": to, "nodes": nodes}
	}
	var twentyImages []any
	for i := range 20 {
		twentyImages = append(twentyImages, fmt.Sprintf("nvidia/cuda:12.%d.0-devel-ubuntu24.04", i))
	}
	for name, tc := range map[string]struct {
		warm   map[string]any
		fields map[string]any
		want   string
	}{
		"unknown zone":        {map[string]any{"timeZone": "Mars/Olympus", "windows": []any{window("mon", "08:00", "09:00", 1)}}, nil, `warm.timeZone: "Mars/Olympus" is not an IANA time zone`},
		"the deployer's zone": {map[string]any{"timeZone": "Local", "windows": []any{window("mon", "08:00", "09:00", 1)}}, nil, `warm.timeZone: "Local" is this machine's zone`},
		"no window":           {map[string]any{"windows": []any{}}, nil, "warm.windows: is empty"},
		"a day that is not":   {map[string]any{"windows": []any{window("mon-fry", "08:00", "09:00", 1)}}, nil, `warm.windows[0].days: "fry" is not a day`},
		"a backward range":    {map[string]any{"windows": []any{window("sat-sun", "08:00", "09:00", 1)}}, nil, `warm.windows[0].days: "sat-sun" runs backwards`},
		"a clock that is not": {map[string]any{"windows": []any{window("mon", "8am", "09:00", 1)}}, nil, `warm.windows[0].from: "8am" is not a time of day`},
		"across midnight":     {map[string]any{"windows": []any{window("mon", "22:00", "06:00", 1)}}, nil, "warm.windows[0].to: 06:00 is not after from (22:00)"},
		"more nodes than GPUs": {map[string]any{"windows": []any{window("mon", "08:00", "09:00", 3)}}, nil,
			"warm.windows[0].nodes: must be 1–gpuLimit (2)"},
		"no node": {map[string]any{"windows": []any{window("mon", "08:00", "09:00", 0)}}, nil, "warm.windows[0].nodes: must be 1–gpuLimit"},
		"two windows at once": {map[string]any{"windows": []any{window("mon-fri", "08:00", "12:00", 1), window("fri", "11:00", "13:00", 1)}}, nil,
			"warm.windows[1]: overlaps warm.windows[0]"},
		"job images on a runner-form pool": {map[string]any{"windows": []any{window("mon", "08:00", "09:00", 1)}, "images": []any{"nvidia/cuda:12.8.1-devel-ubuntu24.04"}}, nil,
			"warm.images: only a container-form pool's jobs run images of their own"},
		"an image that is not": {map[string]any{"windows": []any{window("mon", "08:00", "09:00", 1)}, "images": []any{"NVIDIA/CUDA"}}, map[string]any{"jobForm": "container"},
			`warm.images: "NVIDIA/CUDA" is not an image reference`},
		"more images than the Job's failure policy holds": {map[string]any{"windows": []any{window("mon", "08:00", "09:00", 1)}, "images": twentyImages}, map[string]any{"jobForm": "container"},
			"warm.images: lists 20 images, more than 19"},
		"a misspelt field": {map[string]any{"window": []any{}}, nil, `unknown field "window"`},
		"a lead of seconds": {map[string]any{"windows": []any{window("mon", "08:00", "09:00", 1)}, "lead": "90s"}, nil,
			`warm.lead: 1m30s is not whole minutes up to 1h (a CronJob starts on the minute)`},
		"consolidateAfter under the preemption gap": {map[string]any{"windows": []any{window("mon", "08:00", "09:00", 1)}}, map[string]any{"consolidateAfter": "1s"},
			`consolidateAfter: is 1s, under 5s for a pool with warm windows`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := withWarm(t, tc.warm, tc.fields)
			require.Error(t, err)
			assert.Contains(t, err.Error(), "lux-gpu-ci:gpuPools:")
			assert.Contains(t, err.Error(), tc.want)
			assert.Contains(t, err.Error(), "fix:")
		})
	}
}
