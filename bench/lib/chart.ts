// Small charts as SVG (grouped bars; stacked time-series panels), converted to PNG with rsvg-convert
// (Debian librsvg2-bin, installed on demand with apt-get when missing). No npm
// dependency: benchmarks stay light.
import { execFileSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';

export interface BarGroup {
  readonly label: string;
  /** One value per series; null = not measured. */
  readonly values: readonly (number | null)[];
}

export interface ChartSpec {
  readonly title: string;
  readonly yLabel: string;
  readonly series: readonly string[];
  readonly groups: readonly BarGroup[];
  /** Log10 y axis (values must be > 0). */
  readonly log?: boolean;
}

const COLORS = ['#4e79a7', '#f28e2b', '#59a14f', '#e15759', '#76b7b2', '#edc948', '#b07aa1', '#9c755f'];
const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

export function barChartSvg(c: ChartSpec): string {
  const W = 1020,
    H = 520,
    left = 80,
    right = 310,
    top = 50,
    bottom = 60;
  const pw = W - left - right,
    ph = H - top - bottom;
  const vals = c.groups.flatMap((g) => g.values.filter((v): v is number => v !== null && v > 0));
  const max = Math.max(...vals, 1e-3);
  const min = Math.min(...vals, max);
  const lo = c.log ? Math.floor(Math.log10(min)) : 0;
  const hi = c.log ? Math.ceil(Math.log10(max)) : max * 1.1;
  const y = (v: number) => top + ph - ((c.log ? Math.log10(v) - lo : v) / (hi - lo)) * ph;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="DejaVu Sans, sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="28" text-anchor="middle" font-size="16">${esc(c.title)}</text>`,
  ];
  const ticks = c.log
    ? Array.from({ length: hi - lo + 1 }, (_, i) => 10 ** (lo + i))
    : Array.from({ length: 6 }, (_, i) => (hi / 5) * i);
  for (const t of ticks) {
    const ty = y(c.log ? t : Math.max(t, 0));
    out.push(
      `<line x1="${left}" x2="${left + pw}" y1="${ty}" y2="${ty}" stroke="#ddd"/>`,
      `<text x="${left - 6}" y="${ty + 4}" text-anchor="end">${t < 1 ? t.toPrecision(1) : t.toFixed(0)}</text>`,
    );
  }
  out.push(`<text transform="translate(20 ${top + ph / 2}) rotate(-90)" text-anchor="middle">${esc(c.yLabel)}</text>`);
  const gw = pw / c.groups.length,
    bw = (gw * 0.8) / c.series.length;
  c.groups.forEach((g, gi) => {
    const gx = left + gi * gw + gw * 0.1;
    g.values.forEach((v, si) => {
      if (v === null || v <= 0) return;
      const x = gx + si * bw,
        top0 = y(v);
      out.push(
        `<rect x="${x}" y="${top0}" width="${bw - 2}" height="${top + ph - top0}" fill="${COLORS[si % COLORS.length]}"/>`,
      );
      out.push(
        `<text x="${x + bw / 2}" y="${top0 - 3}" text-anchor="middle" font-size="9">${v < 10 ? v.toFixed(2) : v.toFixed(0)}</text>`,
      );
    });
    out.push(`<text x="${gx + gw * 0.4}" y="${top + ph + 20}" text-anchor="middle">${esc(g.label)}</text>`);
  });
  c.series.forEach((s, si) => {
    const ly = top + 10 + si * 20;
    out.push(
      `<rect x="${left + pw + 15}" y="${ly - 10}" width="12" height="12" fill="${COLORS[si % COLORS.length]}"/>`,
      `<text x="${left + pw + 32}" y="${ly}">${esc(s)}</text>`,
    );
  });
  out.push(
    `<line x1="${left}" x2="${left}" y1="${top}" y2="${top + ph}" stroke="black"/>`,
    `<line x1="${left}" x2="${left + pw}" y1="${top + ph}" y2="${top + ph}" stroke="black"/>`,
    '</svg>',
  );
  return out.join('\n');
}

function haveRsvg(): boolean {
  try {
    execFileSync('rsvg-convert', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** Write `<base>.svg` and `<base>.png`. Returns the PNG path, or null when no converter could be installed. */
export function writeChart(base: string, c: ChartSpec): string | null {
  return writeSvgAndPng(base, barChartSvg(c));
}

/** Write `svg` to `<base>.svg` and convert it to `<base>.png` (null when no converter could be installed). */
export function writeSvgAndPng(base: string, svg: string): string | null {
  writeFileSync(`${base}.svg`, svg);
  if (!haveRsvg()) {
    try {
      execFileSync('apt-get', ['install', '-y', '-qq', 'librsvg2-bin'], {
        stdio: 'ignore',
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      });
    } catch {
      /* below */
    }
    if (!haveRsvg()) return null;
  }
  execFileSync('rsvg-convert', ['-o', `${base}.png`, `${base}.svg`]);
  return `${base}.png`;
}

export interface LinePanel {
  readonly yLabel: string;
  readonly series: ReadonlyArray<{ readonly name: string; readonly points: ReadonlyArray<readonly [number, number]> }>;
}

export interface LinePanelsSpec {
  readonly title: string;
  readonly xLabel: string;
  /** Stacked panels sharing the x axis (time series with different units). */
  readonly panels: readonly LinePanel[];
}

/** Stacked line panels as SVG (each panel its own y scale from 0). */
export function linePanelsSvg(c: LinePanelsSpec): string {
  const W = 1020,
    left = 80,
    right = 160,
    top = 50,
    panelH = 150,
    gap = 30,
    bottom = 50;
  const H = top + c.panels.length * (panelH + gap) - gap + bottom;
  const pw = W - left - right;
  const xs = c.panels.flatMap((p) => p.series.flatMap((s) => s.points.map((q) => q[0])));
  const xMax = Math.max(...xs, 1e-3);
  const x = (v: number) => left + (v / xMax) * pw;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="DejaVu Sans, sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="28" text-anchor="middle" font-size="16">${esc(c.title)}</text>`,
  ];
  c.panels.forEach((p, pi) => {
    const y0 = top + pi * (panelH + gap);
    const vals = p.series.flatMap((s) => s.points.map((q) => q[1]).filter((v) => Number.isFinite(v)));
    const yMax = Math.max(...vals, 1) * 1.1;
    const y = (v: number) => y0 + panelH - (v / yMax) * panelH;
    for (let i = 0; i <= 4; i++) {
      const t = (yMax / 4) * i;
      out.push(
        `<line x1="${left}" x2="${left + pw}" y1="${y(t)}" y2="${y(t)}" stroke="#ddd"/>`,
        `<text x="${left - 6}" y="${y(t) + 4}" text-anchor="end">${t < 10 ? t.toFixed(1) : t.toFixed(0)}</text>`,
      );
    }
    out.push(
      `<text transform="translate(20 ${y0 + panelH / 2}) rotate(-90)" text-anchor="middle">${esc(p.yLabel)}</text>`,
      `<line x1="${left}" x2="${left}" y1="${y0}" y2="${y0 + panelH}" stroke="black"/>`,
      `<line x1="${left}" x2="${left + pw}" y1="${y0 + panelH}" y2="${y0 + panelH}" stroke="black"/>`,
    );
    p.series.forEach((s, si) => {
      const pts = s.points
        .filter((q) => Number.isFinite(q[1]))
        .map((q) => `${x(q[0]).toFixed(1)},${y(q[1]).toFixed(1)}`);
      const color = COLORS[si % COLORS.length];
      out.push(
        `<polyline fill="none" stroke="${color}" stroke-width="1.5" points="${pts.join(' ')}"/>`,
        `<rect x="${left + pw + 15}" y="${y0 + si * 20}" width="12" height="12" fill="${color}"/>`,
        `<text x="${left + pw + 32}" y="${y0 + si * 20 + 10}">${esc(s.name)}</text>`,
      );
    });
  });
  const yb = H - bottom;
  for (let i = 0; i <= 6; i++) {
    const t = (xMax / 6) * i;
    out.push(`<text x="${x(t)}" y="${yb + 16}" text-anchor="middle">${t.toFixed(1)}</text>`);
  }
  out.push(`<text x="${left + pw / 2}" y="${yb + 36}" text-anchor="middle">${esc(c.xLabel)}</text>`, '</svg>');
  return out.join('\n');
}

/** Write `<base>.svg` and `<base>.png` of stacked line panels. */
export function writeLinePanels(base: string, c: LinePanelsSpec): string | null {
  return writeSvgAndPng(base, linePanelsSvg(c));
}
