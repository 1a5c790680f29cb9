// MathJax configuration for pymdownx.arithmatex (generic mode) and the tutorials' LaTeX outputs.
window.MathJax = {
  tex: {
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
