package main

import (
	"encoding/xml"
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
		s := lineStyle(i, len(palette))
		assert.False(t, seen[s], s)
		seen[s] = true
	}
	// The first line drawn is the widest, so that the last leaves it showing.
	assert.Contains(t, lineStyle(0, 3), `stroke-width="2.5"`)
	assert.Contains(t, lineStyle(2, 3), `stroke-width="1.5"`)
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
