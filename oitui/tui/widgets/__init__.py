"""The widgets of oitui's main screen: conversation, code pane, console, sidebar, input, approval bar."""
