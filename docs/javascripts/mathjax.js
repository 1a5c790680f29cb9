// MathJax configuration for pymdownx.arithmatex (generic mode) and the tutorials' LaTeX outputs.
// textmacros: \_ \{ \} inside \text{..} print as _ { } (the recursions' definitions are text rows).
window.MathJax = {
  loader: { load: ["[tex]/textmacros"] },
  tex: {
    packages: { "[+]": ["textmacros"] },
    inlineMath: [["\\(", "\\)"], ["$", "$"]],
    displayMath: [["\\[", "\\]"], ["$$", "$$"]],
    processEscapes: true,
    processEnvironments: true
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex|jp-RenderedLatex|jp-OutputArea-output"
  }
};
if (typeof document$ !== "undefined") {  // Material's instant navigation: typeset every new page
  document$.subscribe(() => { if (window.MathJax.typesetPromise) { MathJax.typesetPromise(); } });
}
