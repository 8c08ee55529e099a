package observability

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// PromQL has no parser in this module's dependency graph, so expressions
// are checked by a lexer: strings and brackets must balance, every function
// must be a PromQL function, every label matcher must be well-formed, and
// every elasti_ name must be a series the code exports.

// promqlFuncs are the PromQL functions and aggregations the assets may call.
var promqlFuncs = map[string]bool{
	"abs": true, "absent": true, "absent_over_time": true, "avg": true, "avg_over_time": true,
	"ceil": true, "changes": true, "clamp_max": true, "clamp_min": true, "count": true,
	"count_over_time": true, "delta": true, "deriv": true, "floor": true, "group": true,
	"histogram_quantile": true, "idelta": true, "increase": true, "irate": true,
	"label_replace": true, "last_over_time": true, "max": true, "max_over_time": true,
	"min": true, "min_over_time": true, "quantile": true, "rate": true, "resets": true,
	"round": true, "scalar": true, "sort": true, "sort_desc": true, "stddev": true,
	"sum": true, "sum_over_time": true, "time": true, "topk": true, "bottomk": true,
	"vector": true,
}

// promqlKeywords are words that are neither metrics nor functions.
var promqlKeywords = map[string]bool{
	"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "and": true, "or": true, "unless": true, "bool": true,
	"offset": true, "inf": true, "nan": true,
}

// builtinSeries are series Prometheus itself writes for every target.
var builtinSeries = map[string]bool{"up": true, "scrape_duration_seconds": true}

var (
	matcherRe  = regexp.MustCompile(`^\s*[a-zA-Z_][a-zA-Z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*$`)
	durationRe = regexp.MustCompile(`^([0-9]+(ms|s|m|h|d|w|y))+$`)
	identRe    = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*`)
	// aggrModifierRe: an aggregation written "sum by (...) (...)".
	aggrModifierRe = regexp.MustCompile(`^(by|without)\s*\(`)
)

// grafanaVars replaces Grafana's variables with values that are valid in
// the places they appear (a range, a regexp).
func grafanaVars(expr string) string {
	expr = strings.ReplaceAll(expr, "$__rate_interval", "5m")
	expr = strings.ReplaceAll(expr, "$__interval", "1m")
	return regexp.MustCompile(`\$\{?[a-zA-Z_][a-zA-Z0-9_]*\}?`).ReplaceAllString(expr, ".*")
}

// checkExpr lexes expr and returns the metric names it selects, or an
// error saying what is malformed. series are the names that exist.
func checkExpr(expr string, series map[string]string) ([]string, error) {
	if strings.TrimSpace(expr) == "" {
		return nil, fmt.Errorf("empty expression")
	}
	var (
		names []string
		stack []byte // open parentheses
		// labelList[k] is true when stack[k] opens a label list: by (...),
		// on (...) and the like, whose identifiers are label names.
		labelList []bool
		prev      string // the previous keyword or function
	)
	grouping := map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			for j < len(expr) && expr[j] != c {
				if expr[j] == '\\' && c != '`' {
					j++
				}
				j++
			}
			if j >= len(expr) {
				return nil, fmt.Errorf("unterminated string at offset %d", i)
			}
			i = j + 1
		case c == '[':
			end := strings.IndexByte(expr[i:], ']')
			if end < 0 {
				return nil, fmt.Errorf("unclosed [ at offset %d", i)
			}
			rng := strings.TrimSpace(expr[i+1 : i+end])
			if before, _, ok := strings.Cut(rng, ":"); ok {
				rng = before // a subquery [range:step]
			}
			if !durationRe.MatchString(rng) {
				return nil, fmt.Errorf("range [%s] is not a duration", rng)
			}
			i += end + 1
		case c == '(':
			stack = append(stack, c)
			labelList = append(labelList, grouping[prev])
			prev = ""
			i++
		case c == '{':
			end := matchingBrace(expr, i)
			if end < 0 {
				return nil, fmt.Errorf("unclosed { at offset %d", i)
			}
			if body := strings.TrimSpace(expr[i+1 : end]); body != "" {
				for _, m := range splitMatchers(body) {
					if !matcherRe.MatchString(m) {
						return nil, fmt.Errorf("malformed label matcher %q", strings.TrimSpace(m))
					}
				}
			}
			i = end + 1
		case c == ')' || c == ']' || c == '}':
			if c != ')' || len(stack) == 0 {
				return nil, fmt.Errorf("unbalanced %q at offset %d", c, i)
			}
			stack = stack[:len(stack)-1]
			labelList = labelList[:len(labelList)-1]
			prev = ""
			i++
		case c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(expr) && (expr[j] >= '0' && expr[j] <= '9' || expr[j] == '.' || expr[j] == 'e' || expr[j] == 'E') {
				j++
			}
			i = j
		case identRe.MatchString(expr[i:]):
			id := identRe.FindString(expr[i:])
			j := i + len(id)
			next := strings.TrimLeft(expr[j:], " \t\n")
			switch {
			case len(labelList) > 0 && labelList[len(labelList)-1]:
				// a label name in by (...), on (...)
			case promqlKeywords[strings.ToLower(id)]:
				prev = strings.ToLower(id)
			case strings.HasPrefix(next, "(") || promqlFuncs[id] && aggrModifierRe.MatchString(next):
				if !promqlFuncs[id] {
					return nil, fmt.Errorf("unknown function %s", id)
				}
				prev = id
			default:
				if _, ok := series[id]; !ok && !builtinSeries[id] {
					return nil, fmt.Errorf("unknown metric %s", id)
				}
				names = append(names, id)
				prev = id
			}
			i = j
		default:
			i++
		}
	}
	if len(stack) > 0 {
		return nil, fmt.Errorf("unclosed %q", stack[len(stack)-1])
	}
	if len(names) == 0 && !strings.Contains(expr, "vector(") {
		return nil, fmt.Errorf("selects no metric")
	}
	return names, nil
}

// matchingBrace returns the index of the } that closes the { at i.
func matchingBrace(s string, i int) int {
	for j := i + 1; j < len(s); j++ {
		switch s[j] {
		case '"':
			for j++; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' {
					j++
				}
			}
		case '}':
			return j
		}
	}
	return -1
}

// splitMatchers splits a selector body at the commas outside strings.
func splitMatchers(body string) []string {
	var out []string
	start, inStr := 0, false
	for j := 0; j < len(body); j++ {
		switch {
		case body[j] == '\\' && inStr:
			j++
		case body[j] == '"':
			inStr = !inStr
		case body[j] == ',' && !inStr:
			out = append(out, body[start:j])
			start = j + 1
		}
	}
	if rest := strings.TrimSpace(body[start:]); rest != "" {
		out = append(out, rest)
	}
	return out
}

func TestCheckExpr(t *testing.T) {
	series := map[string]string{"elasti_x_total": "elasti_x_total", "elasti_h_bucket": "elasti_h"}
	good := []string{
		`sum by (namespace, elastiservice) (rate(elasti_x_total{namespace=~".*", result!="ok"}[5m])) > 0`,
		`histogram_quantile(0.99, sum by (le) (rate(elasti_h_bucket[5m])))`,
		`absent(up{job="a"} == 1 and on (instance) elasti_x_total > 0)`,
		`sum(elasti_x_total) or vector(0)`,
	}
	for _, e := range good {
		if _, err := checkExpr(e, series); err != nil {
			t.Errorf("checkExpr(%q): %v", e, err)
		}
	}
	bad := []string{
		`sum(rate(elasti_x_total[5m])`,
		`rate(elasti_x_total[5 minutes])`,
		`elasti_y_total`,
		`elasti_x_total{namespace=default}`,
		`summ(elasti_x_total)`,
		`elasti_x_total{job="a}`,
		`up}`,
	}
	for _, e := range bad {
		if _, err := checkExpr(e, series); err == nil {
			t.Errorf("checkExpr(%q) passed, want an error", e)
		}
	}
}
