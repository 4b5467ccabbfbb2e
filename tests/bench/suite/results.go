package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Goal is the target of a row: Op (">=" or "<=") X, applied to the ratio when OnRatio,
// else to the value.
type Goal struct {
	OnRatio bool    `json:"on_ratio"`
	Op      string  `json:"op"`
	X       float64 `json:"x"`
}

func (g *Goal) String() string {
	if g == nil {
		return ""
	}
	what := "value"
	if g.OnRatio {
		what = "ratio"
	}
	return fmt.Sprintf("%s %s %s", what, strings.Replace(strings.Replace(g.Op, ">=", "≥", 1), "<=", "≤", 1), num(g.X))
}

func (g *Goal) meets(value, ratio *float64) *bool {
	if g == nil {
		return nil
	}
	v := value
	if g.OnRatio {
		v = ratio
	}
	if v == nil {
		return nil
	}
	ok := *v >= g.X
	if g.Op == "<=" {
		ok = *v <= g.X
	}
	return &ok
}

// Row is one figure of the run. Value is the median over the measured repetitions (the
// warm-up excluded), Spread their (max - min) / median. Peer or Limit names what Ratio
// compares with (RefValue, also a median); Ratio is the median of the per-repetition ratios,
// which interleaving makes comparable. A skipped row has no Value and says why.
type Row struct {
	Section  string    `json:"section"`
	Name     string    `json:"name"`
	Value    *float64  `json:"value,omitempty"`
	Unit     string    `json:"unit"`
	Peer     string    `json:"peer,omitempty"`
	Limit    string    `json:"limit,omitempty"`
	RefValue *float64  `json:"ref_value,omitempty"`
	Ratio    *float64  `json:"ratio,omitempty"`
	Goal     *Goal     `json:"goal,omitempty"`
	Meets    *bool     `json:"meets_goal,omitempty"`
	Spread   *float64  `json:"spread,omitempty"`
	Reps     []float64 `json:"reps,omitempty"`
	Skipped  string    `json:"skipped,omitempty"`
	Note     string    `json:"note,omitempty"`
	// zeroOK marks a count for which 0 is a valid figure (check accepts it).
	zeroOK bool
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	m := median(xs)
	if m == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / math.Abs(m)
}

func ptr(f float64) *float64 { return &f }

// measured builds a row from per-repetition values and, when refs is not nil, the
// reference's per-repetition values (the same length: one per interleaved repetition).
func measured(section, name, unit string, reps, refs []float64) Row {
	r := Row{Section: section, Name: name, Unit: unit, Reps: reps, Value: ptr(median(reps)), Spread: ptr(spread(reps))}
	if refs != nil {
		r.RefValue = ptr(median(refs))
		var ratios []float64
		if len(refs) == len(reps) {
			for i := range reps {
				ratios = append(ratios, reps[i]/refs[i])
			}
		} else {
			ratios = []float64{*r.Value / *r.RefValue}
		}
		r.Ratio = ptr(median(ratios))
	}
	return r
}

func skipped(section, name, unit, why string) Row {
	return Row{Section: section, Name: name, Unit: unit, Skipped: why}
}

// check is what -short asserts, and what every run asserts: each row either produced a
// positive finite number or is skipped naming why. It never looks at a timing's size.
func check(rows []Row) error {
	var bad []string
	for _, r := range rows {
		switch {
		case r.Skipped != "":
		case r.Value == nil:
			bad = append(bad, r.Name+": no value")
		case r.zeroOK && *r.Value == 0:
		case math.IsNaN(*r.Value) || math.IsInf(*r.Value, 0) || *r.Value <= 0:
			bad = append(bad, fmt.Sprintf("%s: %v is not a positive finite number", r.Name, *r.Value))
		case r.Ratio != nil && (math.IsNaN(*r.Ratio) || math.IsInf(*r.Ratio, 0) || *r.Ratio <= 0):
			bad = append(bad, fmt.Sprintf("%s: ratio %v is not a positive finite number", r.Name, *r.Ratio))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("suite: %d rows without a figure:\n  %s", len(bad), strings.Join(bad, "\n  "))
	}
	return nil
}

// Report is results.json.
type Report struct {
	Date        string            `json:"date"`
	Commit      string            `json:"commit"`
	Short       bool              `json:"short"`
	Pinning     string            `json:"pinning"`
	Repetitions int               `json:"repetitions"`
	Workload    map[string]string `json:"workload"`
	Rows        []Row             `json:"rows"`
}

func writeReport(dir string, rep Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	slices.SortStableFunc(rep.Rows, func(a, b Row) int { return strings.Compare(a.Section, b.Section) })
	for i := range rep.Rows {
		r := &rep.Rows[i]
		r.Meets = r.Goal.meets(r.Value, r.Ratio)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.md"))
	if err != nil {
		return err
	}
	writeMarkdown(f, rep)
	return f.Close()
}

func writeMarkdown(w io.Writer, rep Report) {
	fmt.Fprintf(w, "Loam benchmark suite, %s, commit %s%s; %d measured repetitions (warm-up discarded), interleaved; pinning: %s.\n\n",
		rep.Date, rep.Commit, map[bool]string{true: " (-short: tiny sizes, one repetition, figures meaningless)"}[rep.Short], rep.Repetitions, rep.Pinning)
	keys := make([]string, 0, len(rep.Workload))
	for k := range rep.Workload {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(w, "- %s: %s\n", k, rep.Workload[k])
	}
	fmt.Fprintln(w)
	section := ""
	for _, r := range rep.Rows {
		if r.Section != section {
			section = r.Section
			fmt.Fprintf(w, "\n### %s\n\n| figure | value | vs (peer or limit) | ratio | goal | spread | note |\n|---|---|---|---|---|---|---|\n", section)
		}
		if r.Skipped != "" {
			fmt.Fprintf(w, "| %s | skipped | | | %s | | %s |\n", r.Name, r.Goal.String(), r.Skipped)
			continue
		}
		ref := r.Peer + r.Limit
		if r.RefValue != nil {
			ref = fmt.Sprintf("%s (%s)", ref, num(*r.RefValue))
		}
		ratio, meets := "", ""
		if r.Ratio != nil {
			ratio = num(*r.Ratio)
		}
		if r.Meets != nil {
			meets = map[bool]string{true: " ✓", false: " ✗"}[*r.Meets]
		}
		sp := ""
		if r.Spread != nil && len(r.Reps) > 1 {
			sp = fmt.Sprintf("%.0f %%", 100**r.Spread)
		}
		fmt.Fprintf(w, "| %s | %s %s | %s | %s | %s%s | %s | %s |\n", r.Name, num(*r.Value), r.Unit, ref, ratio, r.Goal.String(), meets, sp, r.Note)
	}
}

// num prints a figure with three significant digits (more for large integers).
func num(f float64) string {
	a := math.Abs(f)
	switch {
	case a == 0:
		return "0"
	case a >= 1000:
		return fmt.Sprintf("%.0f", f)
	case a >= 100:
		return fmt.Sprintf("%.0f", f)
	case a >= 10:
		return fmt.Sprintf("%.1f", f)
	case a >= 1:
		return fmt.Sprintf("%.2f", f)
	default:
		return fmt.Sprintf("%.3g", f)
	}
}

// repeated is n copies of v: a constant reference for each repetition.
func repeated(v float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = v
	}
	return out
}
