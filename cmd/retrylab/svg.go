package main

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"math"
)

// The charts are plain SVG written by hand, so that the lab needs nothing
// outside the standard library.

// palette colours the lines and bars of a chart that are no policy, in
// order.
var palette = []string{"#d62728", "#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf"}

// style is how a chart draws a series: its colour, and the dash of its
// line ("": solid).
type style struct{ colour, dash string }

// policyStyles give each policy (policy.name) one style in every chart of
// the report, whatever its place among a chart's rows: the defaults and
// their variants in blues and greens, the policies without a budget in
// warm colours.
var policyStyles = map[string]style{
	"retryhttp defaults":             {"#1f77b4", ""},
	"defaults, Transport per client": {"#17becf", "7,3"},
	"defaults, hold during pause":    {"#9467bd", "2,2"},
	"defaults + cross-hop signal":    {"#2ca02c", ""},
	"full jitter":                    {"#ff7f0e", ""},
	"go-retryablehttp policy":        {"#8c564b", "10,3,2,3"},
	"immediate retry":                {"#d62728", ""},
	"exponential, no jitter":         {"#e377c2", "7,3"},
	"naive":                          {"#bcbd22", "2,2"},
	"no retries":                     {"#7f7f7f", "2,2"},
}

// styleOf returns the style of series i of a chart, named name: its
// policy's, if name is a policy's name, else the palette's i-th colour and
// dash.
func styleOf(name string, i int) style {
	if st, ok := policyStyles[name]; ok {
		return st
	}
	return style{palette[i%len(palette)], dashes[i%len(dashes)]}
}

const (
	chartWidth  = 860
	chartHeight = 420
	marginLeft  = 64
	marginRight = 24
	marginTop   = 44
	marginBot   = 52 // the plot's bottom is chartHeight-marginBot; the legend goes below chartHeight
)

// dashes tell apart the lines of a chart besides their colour, in order,
// so that lines of close colours, or drawn over each other, stay distinct.
var dashes = []string{"", "7,3", "", "2,2", "", "10,3,2,3", ""}

// lineStyle returns the SVG stroke attributes of line i of n, named name:
// its colour and dash (styleOf), and a width that shrinks with the drawing
// order, so that a line drawn over an equal one leaves it showing on both
// sides.
func lineStyle(name string, i, n int) string {
	st := styleOf(name, i)
	width := 1.5 + 0.5*float64(n-1-i)
	attrs := fmt.Sprintf(`stroke="%s" stroke-width="%.1f" stroke-linejoin="round"`, st.colour, width)
	if st.dash != "" {
		attrs += fmt.Sprintf(` stroke-dasharray="%s"`, st.dash)
	}
	return attrs
}

// line is one series of a lineChart: the value of point i is at x = i·dx.
// A note is written under its name in the legend; a mark, if positive, is
// drawn as a dashed vertical line of the series' colour at x = mark (the
// moment the series recovered, say).
type line struct {
	name string
	ys   []float64
	note string
	mark float64
}

// band shades the x range [from, to) of a lineChart, such as an outage.
type band struct {
	from, to float64
	label    string
}

// hline is a dashed horizontal reference line of a lineChart, such as the
// server's capacity.
type hline struct {
	y     float64
	label string
}

// lineChart is a chart of one or more series over a common x axis.
type lineChart struct {
	title, xLabel, yLabel string
	dx                    float64 // x distance between two points
	lines                 []line
	bands                 []band
	hlines                []hline
}

// svg renders the chart.
func (c lineChart) svg() []byte {
	var b bytes.Buffer
	c.lines = trimmed(c.lines)
	if !(c.dx > 0) {
		c.dx = 1
	}
	points := 0
	ymax := 0.0
	for _, l := range c.lines {
		points = max(points, len(l.ys))
		for _, y := range l.ys {
			ymax = max(ymax, y)
		}
	}
	for _, h := range c.hlines {
		ymax = max(ymax, h.y)
	}
	xmax := max(float64(points-1)*c.dx, c.dx)
	ystep := niceStep(ymax, 5)
	ytop := math.Max(ystep, math.Ceil(ymax/ystep)*ystep)
	plotW := float64(chartWidth - marginLeft - marginRight)
	plotH := float64(chartHeight - marginTop - marginBot)
	px := func(x float64) float64 { return marginLeft + x/xmax*plotW }
	py := func(y float64) float64 { return marginTop + plotH - y/ytop*plotH }

	header(&b, c.title, chartHeight+legendHeight(c.lines))
	for _, bd := range c.bands {
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%.1f" fill="#eeeeee"/>`+"\n",
			px(bd.from), marginTop, px(bd.to)-px(bd.from), plotH)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="11" fill="#666" text-anchor="middle">%s</text>`+"\n",
			(px(bd.from)+px(bd.to))/2, marginTop+14, esc(bd.label))
	}
	// Grid and y ticks.
	for y := 0.0; y <= ytop+ystep/2; y += ystep {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", marginLeft, py(y), px(xmax), py(y))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="11" text-anchor="end">%s</text>`+"\n", marginLeft-6, py(y)+4, num(y))
	}
	// X ticks.
	xstep := niceStep(xmax, 8)
	for x := 0.0; x <= xmax+xstep/1000; x += xstep {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", px(x), py(0), px(x), py(0)+5)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", px(x), py(0)+18, num(x))
	}
	axes(&b, c.xLabel, c.yLabel)
	for _, h := range c.hlines {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#000" stroke-dasharray="6,4"/>`+"\n",
			marginLeft, py(h.y), px(xmax), py(h.y))
	}
	for i, l := range c.lines {
		if l.mark > 0 && l.mark <= xmax {
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="3,3"/>`+"\n",
				px(l.mark), marginTop, px(l.mark), py(0), styleOf(l.name, i).colour)
		}
		fmt.Fprintf(&b, `<polyline fill="none" %s points="`, lineStyle(l.name, i, len(c.lines)))
		for j, y := range l.ys {
			if j > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%.1f,%.1f", px(float64(j)*c.dx), py(y))
		}
		b.WriteString(`"/>` + "\n")
	}
	// The labels of the reference lines go over the series, on a white
	// halo, alternating between the right and the left end, so that two
	// close lines keep readable labels.
	for i, h := range c.hlines {
		x, anchor := px(xmax)-4, "end"
		if i%2 == 1 {
			x, anchor = marginLeft+4, "start"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="%s" stroke="white" stroke-width="3" paint-order="stroke">%s</text>`+"\n",
			x, py(h.y)-4, anchor, esc(h.label))
	}
	legend(&b, c.lines)
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// trimmed returns lines cut after the last point where any of them is
// non-zero, plus one: the quiet end of a run is not worth the width.
func trimmed(lines []line) []line {
	last := 0
	for _, l := range lines {
		for i, y := range l.ys {
			if y != 0 {
				last = max(last, i)
			}
		}
	}
	out := make([]line, len(lines))
	for i, l := range lines {
		out[i] = l
		out[i].ys = l.ys[:min(len(l.ys), last+2)]
	}
	return out
}

// bar is one bar of a barChart. policy, if set, is the name of the
// policy it measures: the bar has that policy's colour (styleOf).
type bar struct {
	label  string
	value  float64
	policy string
}

// barChart is a horizontal bar chart. Its axis is logarithmic, for values
// that span orders of magnitude (1 to 243, say; values below 1 are drawn
// as 1), unless linear.
type barChart struct {
	title, xLabel string
	bars          []bar
	linear        bool
}

// svg renders the chart.
func (c barChart) svg() []byte {
	var b bytes.Buffer
	vmax := 0.0
	for _, br := range c.bars {
		vmax = max(vmax, br.value)
	}
	const labelW = 300
	plotW := float64(chartWidth - labelW - 40)
	rowH := 26.0
	height := marginTop + int(rowH*float64(len(c.bars))) + marginBot
	var px func(float64) float64
	var ticks []float64
	if c.linear {
		step := niceStep(vmax, 5)
		top := math.Max(step, math.Ceil(vmax/step)*step)
		px = func(v float64) float64 { return labelW + max(v, 0)/top*plotW }
		for v := 0.0; v <= top+step/2; v += step {
			ticks = append(ticks, v)
		}
	} else {
		decades := math.Ceil(math.Log10(max(vmax, 10)))
		px = func(v float64) float64 { return labelW + math.Log10(max(v, 1))/decades*plotW }
		for d := 0.0; d <= decades; d++ {
			ticks = append(ticks, math.Pow(10, d))
		}
	}

	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", 12, esc(c.title))
	bottom := float64(height - marginBot)
	for _, v := range ticks {
		x := px(v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%.1f" stroke="#dddddd"/>`+"\n", x, marginTop, x, bottom)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="middle">%s</text>`+"\n", x, bottom+16, num(v))
	}
	for i, br := range c.bars {
		y := float64(marginTop) + float64(i)*rowH
		key := br.policy
		if key == "" {
			key = br.label
		}
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" font-size="12" text-anchor="end">%s</text>`+"\n", labelW-8, y+rowH/2+4, esc(br.label))
		fmt.Fprintf(&b, `<rect x="%d" y="%.1f" width="%.1f" height="%.1f" fill="%s"/>`+"\n",
			labelW, y+4, max(px(br.value)-labelW, 1), rowH-8, styleOf(key, i).colour)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="11">%s</text>`+"\n", px(br.value)+4, y+rowH/2+4, num(br.value))
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#333"/>`+"\n", labelW, bottom, px(ticks[len(ticks)-1]), bottom)
	fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", labelW+plotW/2, height-12, esc(c.xLabel))
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// header opens an SVG document of the line chart's width and the given
// height, with a title.
func header(b *bytes.Buffer, title string, height int) {
	fmt.Fprintf(b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif">`+"\n",
		chartWidth, height, chartWidth, height)
	fmt.Fprintf(b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(b, `<text x="%d" y="24" font-size="15" font-weight="bold">%s</text>`+"\n", marginLeft, esc(title))
}

// axes draws the x and y axes of a line chart and their labels.
func axes(b *bytes.Buffer, xLabel, yLabel string) {
	right := chartWidth - marginRight
	bottom := chartHeight - marginBot
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", marginLeft, bottom, right, bottom)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#333"/>`+"\n", marginLeft, marginTop, marginLeft, bottom)
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12" text-anchor="middle">%s</text>`+"\n", (marginLeft+right)/2, chartHeight-12, esc(xLabel))
	fmt.Fprintf(b, `<text x="16" y="%d" font-size="12" text-anchor="middle" transform="rotate(-90 16 %d)">%s</text>`+"\n",
		(marginTop+bottom)/2, (marginTop+bottom)/2, esc(yLabel))
}

// legendColumns is the number of columns of a line chart's legend.
const legendColumns = 2

// legendRow returns the height of one row of a legend of lines: taller when
// a line has a note under its name.
func legendRow(lines []line) int {
	for _, l := range lines {
		if l.note != "" {
			return 34
		}
	}
	return 20
}

// legendHeight returns the height the legend of lines takes below the plot.
func legendHeight(lines []line) int {
	rows := (len(lines) + legendColumns - 1) / legendColumns
	return rows*legendRow(lines) + 16
}

// legend lists the lines' names, styles and notes below the plot, in
// columns, where long names have the chart's whole width.
func legend(b *bytes.Buffer, lines []line) {
	colW := (chartWidth - marginLeft) / legendColumns
	step := legendRow(lines)
	for i, l := range lines {
		x := marginLeft + (i%legendColumns)*colW
		y := chartHeight + 12 + (i/legendColumns)*step
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" %s/>`+"\n", x, y, x+30, y, lineStyle(l.name, i, len(lines)))
		fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12">%s</text>`+"\n", x+36, y+4, esc(l.name))
		if l.note != "" {
			fmt.Fprintf(b, `<text x="%d" y="%d" font-size="10" fill="#555">%s</text>`+"\n", x+36, y+17, esc(l.note))
		}
	}
}

// niceStep returns a step of 1, 2 or 5 times a power of ten that cuts
// [0, span] into about n intervals.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// num formats an axis value without trailing zeros.
func num(v float64) string {
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f", v)
	}
	return fmt.Sprintf("%.3g", v)
}

// esc escapes text for SVG.
func esc(s string) string {
	var b bytes.Buffer
	_ = xml.EscapeText(&b, []byte(s)) // writes to a bytes.Buffer never fail
	return b.String()
}
