// Opens a `sinkc report` HTML file in Debian's chromium (headless, through
// playwright-core) and checks what a reader would see: no console error, no
// page error, no network request, and every chart (figure.chart) drew: one
// <svg> of a real size whose screenshot has ink and colored data marks
// (lines, bars, heatmap cells), not just gray axes.
//
//   node check_report.mjs REPORT.html OUT_DIR MIN_CHARTS
//
// Writes OUT_DIR/report.png (the whole page) and OUT_DIR/charts/*.png (each
// chart). Exits 1 on any problem.
import fs from 'node:fs';
import path from 'node:path';
import { inflateSync } from 'node:zlib';
import { chromium } from 'playwright-core';

const [htmlArg, outDir, minChartsArg] = process.argv.slice(2);
if (!htmlArg || !outDir) {
  console.error('usage: node check_report.mjs REPORT.html OUT_DIR [MIN_CHARTS]');
  process.exit(2);
}
const minCharts = Number(minChartsArg || 1);
const executablePath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!fs.existsSync(executablePath)) {
  console.error(`FAIL: no browser at ${executablePath} (install Debian's chromium: scripts/setup.sh --tests)`);
  process.exit(1);
}

// ---- PNG: just enough to read chromium's screenshots (8-bit RGB or RGBA) --
function paeth(a, b, c) {
  const p = a + b - c;
  const pa = Math.abs(p - a), pb = Math.abs(p - b), pc = Math.abs(p - c);
  return pa <= pb && pa <= pc ? a : pb <= pc ? b : c;
}

function decodePng(buf) {
  let pos = 8, width = 0, height = 0, channels = 0;
  const idat = [];
  while (pos < buf.length) {
    const len = buf.readUInt32BE(pos);
    const type = buf.toString('ascii', pos + 4, pos + 8);
    const data = buf.subarray(pos + 8, pos + 8 + len);
    if (type === 'IHDR') {
      width = data.readUInt32BE(0);
      height = data.readUInt32BE(4);
      const depth = data[8], colorType = data[9], interlace = data[12];
      if (depth !== 8 || interlace !== 0 || (colorType !== 2 && colorType !== 6))
        throw new Error(`unsupported PNG: depth ${depth}, color type ${colorType}, interlace ${interlace}`);
      channels = colorType === 6 ? 4 : 3;
    } else if (type === 'IDAT') {
      idat.push(data);
    }
    pos += 12 + len;
  }
  const raw = inflateSync(Buffer.concat(idat));
  const stride = width * channels;
  const px = Buffer.alloc(height * stride);
  for (let y = 0; y < height; y++) {
    const filter = raw[y * (stride + 1)];
    const src = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    for (let x = 0; x < stride; x++) {
      const a = x >= channels ? px[y * stride + x - channels] : 0;
      const b = y > 0 ? px[(y - 1) * stride + x] : 0;
      const c = x >= channels && y > 0 ? px[(y - 1) * stride + x - channels] : 0;
      const pred = [0, a, b, (a + b) >> 1, paeth(a, b, c)][filter];
      px[y * stride + x] = (src[x] + pred) & 0xff;
    }
  }
  return { width, height, channels, px };
}

// Share of pixels that are not background, and of pixels with a clear hue
// (data marks: axes, grid and labels are gray).
function ink(png) {
  const { width, height, channels, px } = png;
  let inked = 0, colored = 0;
  for (let i = 0; i < width * height; i++) {
    const r = px[i * channels], g = px[i * channels + 1], b = px[i * channels + 2];
    if (255 - Math.min(r, g, b) > 24) inked++;
    if (Math.max(r, g, b) - Math.min(r, g, b) > 60) colored++;
  }
  return { inked: inked / (width * height), colored: colored / (width * height) };
}

// ---- the page ---------------------------------------------------------------
const problems = [];
const htmlPath = path.resolve(htmlArg);
fs.mkdirSync(path.join(outDir, 'charts'), { recursive: true });
const browser = await chromium.launch({
  executablePath,
  headless: true,
  // A fresh profile comes with every launch (a temporary user data dir).
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking',
         '--disable-component-update', '--disable-sync'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console error: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('request', (r) => { if (!r.url().startsWith('file:')) problems.push(`network request: ${r.url()}`); });
  page.on('requestfailed', (r) => problems.push(`failed request: ${r.url()}`));
  await page.goto('file://' + htmlPath, { waitUntil: 'load' });

  const scripts = await page.evaluate(() => document.scripts.length);
  if (scripts !== 0) problems.push(`${scripts} <script> element(s): the report must render without script`);
  await page.screenshot({ path: path.join(outDir, 'report.png'), fullPage: true });

  const figures = await page.locator('figure.chart').all();
  if (figures.length < minCharts) problems.push(`${figures.length} charts, expected at least ${minCharts}`);
  for (const [k, figure] of figures.entries()) {
    const id = (await figure.getAttribute('data-chart')) || `chart${k}`;
    const svgs = figure.locator('svg');
    if ((await svgs.count()) !== 1) {
      problems.push(`${id}: ${await svgs.count()} <svg> elements, expected 1`);
      continue;
    }
    await figure.scrollIntoViewIfNeeded();
    const box = await svgs.first().boundingBox();
    if (!box || box.width < 150 || box.height < 80) {
      problems.push(`${id}: drawn at ${JSON.stringify(box)}, too small or not at all`);
      continue;
    }
    const file = path.join(outDir, 'charts', id.replace(/[^A-Za-z0-9_.-]/g, '_') + '.png');
    const { inked } = ink(decodePng(await svgs.first().screenshot({ path: file })));
    // Data marks inside the plot area (the legend's swatches are outside it).
    const area = figure.locator('.plot-area');
    if ((await area.count()) !== 1) {
      problems.push(`${id}: no plot area (rect.plot-area) to look into`);
      continue;
    }
    const clip = await area.boundingBox();
    const { colored } = ink(decodePng(await page.screenshot({ clip })));
    const verdict = inked > 0.01 && colored > 0.002 ? 'ok' : 'BLANK';
    console.log(`${verdict} ${id}: ${Math.round(box.width)}x${Math.round(box.height)} px, ` +
                `${(100 * inked).toFixed(1)}% ink, ${(100 * colored).toFixed(2)}% of the plot area colored`);
    if (verdict !== 'ok') problems.push(`${id}: blank (ink ${inked.toFixed(4)}, plot area colored ${colored.toFixed(4)})`);
  }
  console.log(`page: ${figures.length} charts; screenshots in ${path.resolve(outDir)}`);
} finally {
  await browser.close();
}
for (const p of problems) console.error('FAIL: ' + p);
console.log(problems.length ? `${problems.length} problem(s)` : 'report rendered: every chart drew, no console error, no network');
process.exit(problems.length ? 1 : 0);
