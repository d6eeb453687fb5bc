# The agent's todo list (write_todos) and /todos
todos-title = 📋 <b>Todo</b>
todos-empty = 📋 No todo list in this conversation yet.
menu-todos = The agent's todo list
