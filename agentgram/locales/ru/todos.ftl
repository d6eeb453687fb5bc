# Список задач агента (write_todos) и /todos
todos-title = 📋 <b>Задачи</b>
todos-empty = 📋 В этом разговоре пока нет списка задач.
menu-todos = Список задач агента
