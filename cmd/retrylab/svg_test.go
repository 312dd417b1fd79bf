package main

import (
	"bytes"
	"encoding/xml"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Regression (issue 25): the legend sat right of the plot, in 250px, and
// cut off long names ("LoadShedder, fixed + q…"). Now it sits below the
// plot: every text starts inside the chart, and the chart is tall enough
// for every row of the legend.
func TestLegendInsideTheChart(t *testing.T) {
	var lines []line
	for i := range 7 {
		lines = append(lines, line{
			name: "retryhttp defaults, LoadShedder, adaptive " + strconv.Itoa(i),
			ys:   []float64{1, 2, 3},
			note: "364 useful/s after, ≥90% after 0.5s",
		})
	}
	out := lineChart{title: "t", xLabel: "x", yLabel: "y", dx: 0.1, lines: lines}.svg()

	dec := xml.NewDecoder(strings.NewReader(string(out)))
	var width, height float64
	texts := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := func(name string) float64 {
			for _, a := range el.Attr {
				if a.Name.Local == name {
					v, err := strconv.ParseFloat(a.Value, 64)
					require.NoError(t, err, name)
					return v
				}
			}
			return 0
		}
		switch el.Name.Local {
		case "svg":
			width, height = attr("width"), attr("height")
		case "text":
			var text string
			_ = dec.DecodeElement(&text, &el)
			if attr("y") <= chartHeight {
				continue // not the legend
			}
			texts++
			// About 0.55em per character of a sans-serif font.
			w := 0.55 * attr("font-size") * float64(len([]rune(text)))
			assert.LessOrEqual(t, attr("x")+w, width, "%q runs past the chart's right edge", text)
			assert.Less(t, attr("y"), height, "%q below the chart's bottom", text)
		}
	}
	assert.Equal(t, 2*len(lines), texts, "names and notes")
	assert.Greater(t, height, float64(chartHeight), "the legend adds height")
}

// Lines of one chart differ in colour, dash or width, so that equal series
// drawn over each other stay visible.
func TestLineStylesDiffer(t *testing.T) {
	seen := map[string]bool{}
	for i := range len(palette) {
		s := lineStyle("series "+strconv.Itoa(i), i, len(palette))
		assert.False(t, seen[s], s)
		seen[s] = true
	}
	// The first line drawn is the widest, so that the last leaves it showing.
	assert.Contains(t, lineStyle("a", 0, 3), `stroke-width="2.5"`)
	assert.Contains(t, lineStyle("c", 2, 3), `stroke-width="1.5"`)
}

// Regression (issue 36): a bar's colour followed its row, so "retryhttp
// defaults" was red in one chart and purple in the next. A policy now has
// one colour (and, for a line, one dash) in every chart, whatever its
// row: two bar charts and two line charts with the policies in different
// orders colour each policy alike, and two policies differently.
func TestPolicyKeepsItsColourAcrossCharts(t *testing.T) {
	names := []string{"retryhttp defaults", "full jitter", "go-retryablehttp policy", "immediate retry"}
	reversed := slices.Clone(names)
	slices.Reverse(reversed)
	bars := func(order []string) []byte {
		var bs []bar
		for i, n := range order {
			bs = append(bs, bar{label: "batch, " + n, value: float64(i + 1), policy: n})
		}
		return barChart{title: "t", xLabel: "x", bars: bs}.svg()
	}
	lines := func(order []string) []byte {
		var ls []line
		for _, n := range order {
			ls = append(ls, line{name: n, ys: []float64{1, 2}})
		}
		return lineChart{title: "t", xLabel: "x", yLabel: "y", dx: 1, lines: ls}.svg()
	}
	barsA, barsB := barStyles(t, bars(names)), barStyles(t, bars(reversed))
	linesA, linesB := legendStyles(t, lines(names)), legendStyles(t, lines(reversed))
	seen := map[string]string{}
	for _, n := range names {
		require.Contains(t, barsA, "batch, "+n)
		assert.Equal(t, barsA["batch, "+n], barsB["batch, "+n], "%s: the colour of its bar", n)
		assert.Equal(t, linesA[n], linesB[n], "%s: the colour and dash of its line", n)
		assert.Contains(t, linesA[n], barsA["batch, "+n], "%s: its line has its bar's colour", n)
		other, dup := seen[barsA["batch, "+n]]
		assert.False(t, dup, "%s and %s share a colour", n, other)
		seen[barsA["batch, "+n]] = n
	}
}

// barStyles returns the fill of each bar of a bar chart, by its label (the
// text drawn just before it).
func barStyles(t *testing.T, svg []byte) map[string]string {
	out := map[string]string{}
	last := ""
	walkSVG(t, svg, func(el xml.StartElement, text string) {
		switch el.Name.Local {
		case "text":
			last = text
		case "rect":
			if f := attrOf(el, "fill"); f != "white" && last != "" {
				out[last] = f
			}
		}
	})
	return out
}

// legendStyles returns the stroke and dash of each line of a line chart's
// legend, by its name (the text drawn just after it).
func legendStyles(t *testing.T, svg []byte) map[string]string {
	out := map[string]string{}
	last := ""
	walkSVG(t, svg, func(el xml.StartElement, text string) {
		switch el.Name.Local {
		case "line":
			last = attrOf(el, "stroke") + " " + attrOf(el, "stroke-dasharray")
		case "text":
			if last != "" {
				out[text] = last
			}
			last = ""
		}
	})
	return out
}

// walkSVG calls fn with every element of svg, and the text of a text
// element.
func walkSVG(t *testing.T, svg []byte, fn func(el xml.StartElement, text string)) {
	dec := xml.NewDecoder(bytes.NewReader(svg))
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return
		}
		require.NoError(t, err)
		el, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		text := ""
		if el.Name.Local == "text" {
			require.NoError(t, dec.DecodeElement(&text, &el))
		}
		fn(el, text)
	}
}

func attrOf(el xml.StartElement, name string) string {
	for _, a := range el.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

func TestPlural(t *testing.T) {
	assert.Equal(t, "1 request", plural(1, "request"))
	assert.Equal(t, "0 requests", plural(0, "request"))
	assert.Equal(t, "12 workers", plural(12, "worker"))
}

func TestSlug(t *testing.T) {
	assert.Equal(t, "immediate-retry", slug("immediate retry"))
	assert.Equal(t, "defaults-transport-per-client", slug("defaults, Transport per client"))
	assert.Equal(t, "a", slug("  A! "))
}
