"""A long Chinese essay in the shape of the one issue 42 reports (45 KB of Markdown whose second
section alone was past Gmail's clip: 精读《Function Component 入门》 of ascoders/weekly): a title,
two lines of intro, a short first section, a second section of paragraphs and 66 code blocks,
and a last section. Written here, block by block, so every paragraph and code block is told
apart by its number; no real essay is copied.
"""

from __future__ import annotations

# A paragraph of the essay: 45 CJK characters and three inline `code` spans, as a technical
# essay has them.
_PARAGRAPH = (
    "第{n}段：在大型项目里，`useState` 和 `useEffect` 的写法会影响渲染次数，"
    "所以先测量，再决定是否拆分组件，最后看 `props` 的传递。"
)
_CODE = """// 示例 {n}：带重试的请求
export async function fetch{n}(url, retries = 3) {{
  for (let attempt = 0; attempt < retries; attempt++) {{
    const response = await fetch(url, {{ headers: {{ "Accept": "application/json" }} }});
    if (response.status < 500) return await response.json();
  }}
  throw new Error(`gave up on ${{url}} <code-{n}>`);
}}"""
CODE_BLOCKS = 66


def paragraph(n: int) -> str:
    return _PARAGRAPH.format(n=n)


def code(n: int) -> str:
    return _CODE.format(n=n)


def long_essay(number: int = 902, shape: str = "blocks") -> str:
    """The essay's Markdown (about 46 KB). Its second section is one run of blocks (`blocks`),
    66 parts (`items`) of a paragraph, a code block and a paragraph each, or one part holding
    all of them (`item`). `items` is headed as the real essay is: its sections are `#`
    headings and its parts `###` ones (no `##` at all), the others `##` and `###`."""
    top = "#" if shape == "items" else "##"
    lines = ["---", f"number: {number}", "title: 一篇很长的前端文章", "---", ""]
    lines += ["这是一篇长文的开头。", "", "它的第二部分有很多代码。", ""]
    lines += [f"{top} 第一部分：背景", "", paragraph(0), "", paragraph(1), ""]
    lines += [f"{top} 第二部分：实践", ""] + (["### 全部代码", ""] if shape == "item" else [])
    for n in range(CODE_BLOCKS):
        if shape == "items":
            lines += [f"### 小节 {n}", ""]
        lines += [paragraph(100 + n), "", "```js", code(n), "```", "", paragraph(200 + n), ""]
    lines += [f"{top} 第三部分：总结", "", paragraph(2), ""]
    return "\n".join(lines)
