# Навыки агента (skills/<name>/SKILL.md) и /skills
# { $name } и { $description } приходят уже экранированными.
skills-title = 🧩 <b>Навыки</b>
skills-item = • <code>{ $name }</code> — { $description }
skills-none = 🧩 Навыков пока нет. Положите папку с <code>SKILL.md</code> в <code>skills/</code> моей рабочей папки и перезапустите меня.
menu-skills = Процедуры, которые я умею загружать
