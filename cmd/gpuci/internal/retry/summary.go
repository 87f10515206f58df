package retry

import (
	"fmt"
	"slices"
	"strings"
)

// Summary is the decision as a job summary (Markdown, for $GITHUB_STEP_SUMMARY): what was
// re-run and why, and for every failed or cancelled job why it was or was not re-run.
func (d Decision) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### gpuci retry: %s run %d, attempt %d\n\n", d.Repo, d.RunID, d.Attempt)
	switch d.Method {
	case "":
		fmt.Fprintf(&b, "**Not re-run**: %s.\n", d.Reason)
	default:
		fmt.Fprintf(&b, "**Re-run** (%s): %s.\n", d.Method, d.Reason)
	}
	if len(d.Failed) == 0 {
		return b.String()
	}
	b.WriteString("\n| job | concluded | runner | re-run | why |\n|---|---|---|---|---|\n")
	for _, j := range d.Failed {
		rerun := "no"
		switch {
		case slices.Contains(d.Rerun, j.ID):
			rerun = "**yes**"
		case slices.Contains(d.Next, j.ID):
			rerun = "after this attempt"
		}
		runner := j.Runner
		if runner == "" {
			runner = "(none: queued)"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", cell(j.Name), j.Conclusion, cell(runner), rerun, cell(j.Evidence))
	}
	return b.String()
}

// cell keeps a table cell in its cell: no pipe or line break of a job name or evidence ends it.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "\n", " ").Replace(s)
}
