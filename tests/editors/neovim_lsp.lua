-- Driven by tests/editors/neovim_test.py: Neovim's own LSP client (0.7+)
-- attaches `sinkc lsp` to a spec, then the diagnostics, a hover, a completion
-- and a formatting edit it received are written to $OUT as JSON.
local sinkc, spec, out = os.getenv('SINKC'), os.getenv('SPEC'), os.getenv('OUT')
vim.cmd('edit ' .. vim.fn.fnameescape(spec))
local buf = vim.api.nvim_get_current_buf()
vim.bo[buf].filetype = 'sink'
local client_id = vim.lsp.start_client({ name = 'sinkc', cmd = { sinkc, 'lsp' }, root_dir = vim.fn.fnamemodify(spec, ':h') })
vim.lsp.buf_attach_client(buf, client_id)
vim.wait(10000, function() return #vim.diagnostic.get(buf) > 0 end, 20)

local result = { diagnostics = {}, hover = '', completion = {}, formatted = '' }
for _, d in ipairs(vim.diagnostic.get(buf)) do
  table.insert(result.diagnostics, { line = d.lnum, col = d.col, message = d.message })
end
local function at(line, character)
  return { textDocument = { uri = vim.uri_from_bufnr(buf) }, position = { line = line, character = character } }
end
for _, r in pairs(vim.lsp.buf_request_sync(buf, 'textDocument/hover', at(3, 4), 10000) or {}) do
  if r.result and r.result.contents then result.hover = r.result.contents.value end
end
for _, r in pairs(vim.lsp.buf_request_sync(buf, 'textDocument/completion', at(4, 10), 10000) or {}) do
  for _, item in ipairs(r.result and (r.result.items or r.result) or {}) do table.insert(result.completion, item.label) end
end
local formatting = { textDocument = { uri = vim.uri_from_bufnr(buf) }, options = { tabSize = 2, insertSpaces = true } }
for _, r in pairs(vim.lsp.buf_request_sync(buf, 'textDocument/formatting', formatting, 10000) or {}) do
  for _, edit in ipairs(r.result or {}) do result.formatted = edit.newText end
end
local f = io.open(out, 'w')
f:write(vim.fn.json_encode(result))
f:close()
vim.lsp.stop_client(client_id)
vim.cmd('qa!')
