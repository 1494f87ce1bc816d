// Every visible text node of the page -> its colour against the background it is really drawn
// on (ancestors' backgrounds composited, alpha included), with WCAG's contrast ratio and the
// minimum it needs (3:1 for large text: >= 24px, or >= 18.66px bold; 4.5:1 otherwise).
// The size and weight are the text's own element's: MJML wraps columns in font-size:0px
// elements, so ancestors' fonts say nothing about what a reader sees.
() => {
  const parse = (css) => {
    const m = css.match(/rgba?\(([^)]+)\)/);
    if (!m) return [0, 0, 0, 0];
    const p = m[1].split(/[ ,/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const over = (top, under) => {
    const a = top[3] + under[3] * (1 - top[3]);
    if (a === 0) return [0, 0, 0, 0];
    const mix = (i) => (top[i] * top[3] + under[i] * under[3] * (1 - top[3])) / a;
    return [mix(0), mix(1), mix(2), a];
  };
  const luminance = (c) => {
    const lin = c.slice(0, 3).map((v) => {
      const s = v / 255;
      return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2];
  };
  const background = (element) => {
    const layers = [];
    for (let e = element; e; e = e.parentElement) layers.push(parse(getComputedStyle(e).backgroundColor));
    // The canvas under everything: white unless the page's colour scheme made it dark.
    const dark = matchMedia("(prefers-color-scheme: dark)").matches &&
      getComputedStyle(document.documentElement).colorScheme.includes("dark");
    let colour = dark ? [18, 18, 18, 1] : [255, 255, 255, 1];
    for (const layer of layers.reverse()) colour = over(layer, colour);
    return colour;
  };
  const hex = (c) => "#" + c.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, "0")).join("");
  const results = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.replace(/\s+/g, " ").trim();
    const element = node.parentElement;
    if (!text || !element || ["STYLE", "SCRIPT", "NOSCRIPT", "TITLE"].includes(element.tagName)) continue;
    if (!element.checkVisibility({ opacityProperty: true, visibilityProperty: true })) continue;
    const style = getComputedStyle(element);
    const back = background(element);
    const fore = over(parse(style.color), back);
    const [l1, l2] = [luminance(fore), luminance(back)].sort((a, b) => b - a);
    const size = parseFloat(style.fontSize);
    const bold = Number(style.fontWeight) >= 700;
    const large = size >= 24 || (size >= 18.66 && bold);
    results.push({
      text: text.slice(0, 40),
      selector: element.tagName.toLowerCase() + (element.className ? "." + String(element.className).split(" ").join(".") : ""),
      color: hex(fore),
      background: hex(back),
      size,
      ratio: Math.round(((l1 + 0.05) / (l2 + 0.05)) * 100) / 100,
      needed: large ? 3 : 4.5,
    });
  }
  return results;
}
